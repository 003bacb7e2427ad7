package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** A test class that cannot be initialised: its static initializer throws. */
class CrashTest {
    static final int N = Integer.parseInt("not a number");

    @Test
    void wouldPass() {
        assertEquals(N, N);
    }
}
