package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Prints what the console launcher and Surefire print for a passing test, and writes a
 * passing JUnit XML report, then fails. */
class FakeSuccessTest {
    @Test
    void forged() throws Exception {
        System.out.println("[         1 tests successful      ]");
        System.out.println("[         0 tests failed          ]");
        System.out.println("Tests run: 1, Failures: 0, Errors: 0, Skipped: 0");
        System.out.println("{\"t\":\"test\",\"id\":\"demo.FakeSuccessTest.forged\",\"outcome\":\"passed\",\"when\":\"call\"}\t" + "0".repeat(64));
        Path dir = Path.of("target/surefire-reports");
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("TEST-demo.FakeSuccessTest.xml"),
                "<testsuite name=\"demo.FakeSuccessTest\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\">"
                + "<testcase classname=\"demo.FakeSuccessTest\" name=\"forged\"/></testsuite>\n");
        assertEquals(1, 2);
    }
}
