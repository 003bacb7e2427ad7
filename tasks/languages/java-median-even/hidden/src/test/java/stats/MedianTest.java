package stats;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class MedianTest {
    @Test
    void oddLength() {
        assertEquals(2.0, Stats.median(3, 1, 2));
    }

    @Test
    void evenLength() {
        assertEquals(2.5, Stats.median(4, 1, 3, 2));
    }
}
