package stats

import "testing"

func TestMedianOdd(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Fatalf("Median([3 1 2]) = %v, want 2", got)
	}
}
func TestMedianEven(t *testing.T) {
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("Median([4 1 3 2]) = %v, want 2.5", got)
	}
}
