package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class CalcTest {
    @Test
    void addsNumbers() {
        assertEquals(5, Calc.add(2, 3));
    }

    @Test
    void meanOfEmptyThrows() { // fails: the bug
        assertThrows(ArithmeticException.class, () -> Calc.mean());
    }

    @Test
    void onlyOnMars() {
        assumeTrue(false, "not on Mars");
    }

    @Disabled("not today")
    @Test
    void disabled() {
    }

    @ParameterizedTest
    @CsvSource({"1,1,2", "2,2,4", "2,2,5"})
    void addsPairs(int a, int b, int sum) { // [3] fails
        assertEquals(sum, Calc.add(a, b));
    }

    @Nested
    class Means {
        @Test
        void meanOfTwo() {
            assertEquals(1.5, Calc.mean(1, 2));
        }
    }
}
