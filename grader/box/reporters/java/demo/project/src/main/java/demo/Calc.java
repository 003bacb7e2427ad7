package demo;

/** The library under test: mean has a bug (an empty array gives NaN instead of an exception). */
public final class Calc {
    private Calc() {}

    public static int add(int a, int b) {
        return a + b;
    }

    public static double mean(int... xs) {
        double s = 0;
        for (int x : xs) {
            s += x;
        }
        return s / xs.length;
    }
}
