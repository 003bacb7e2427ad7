package honest

import (
	"fmt"
	"testing"
)

func TestPass(t *testing.T) {
	if Add(2, 2) != 4 {
		t.Fatal("2+2")
	}
}

func TestFail(t *testing.T) {
	if Add(2, 2) != 5 {
		t.Error("2+2 is not 5")
	}
}

func TestSkip(t *testing.T) { t.Skip("not today") }

func TestTable(t *testing.T) {
	for _, c := range []struct {
		name    string
		a, b, w int
	}{{"one plus one", 1, 1, 2}, {"wrong sum", 1, 1, 3}, {"ünïcode", 0, 0, 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Add(c.a, c.b); got != c.w {
				t.Errorf("got %d", got)
			}
		})
	}
}

func FuzzAdd(f *testing.F) {
	f.Add(1, 2)
	f.Add(-1, 1)
	f.Fuzz(func(t *testing.T, a, b int) {
		if Add(a, b) != Add(b, a) {
			t.Error("not commutative")
		}
	})
}

func ExampleAdd() {
	fmt.Println(Add(1, 2))
	// Output: 3
}

func ExampleAdd_wrong() {
	fmt.Println(Add(1, 2))
	// Output: 4
}
