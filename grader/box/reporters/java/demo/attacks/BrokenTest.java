package demo;

import org.junit.jupiter.api.Test;

/** Does not compile (a method the library does not have). */
class BrokenTest {
    @Test
    void usesMissingApi() {
        Calc.median(1, 2, 3);
    }
}
