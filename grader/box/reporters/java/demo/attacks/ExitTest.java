package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/** Passes one test, then ends the JVM with status 0 before the failing one is reported. */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ExitTest {
    @Test
    @Order(1)
    void passes() {
        assertEquals(2, Calc.add(1, 1));
    }

    @Test
    @Order(2)
    void exits() {
        System.exit(0);
    }
}
