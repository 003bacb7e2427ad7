/**
 * The signed report channel of a JUnit run. A named module so that its state (the key, the
 * HMAC chain) is strongly encapsulated: test code, which runs in unnamed modules, cannot read
 * its private fields by reflection, and only this module gets deep access to java.io
 * (the launcher passes {@code --add-opens java.base/java.io=grader.report}) to turn the
 * inherited descriptor numbers into streams.
 */
module grader.report {
    exports grader.report;
}
