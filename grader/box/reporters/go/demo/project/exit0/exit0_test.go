package exit0

import "testing"

func TestPasses(t *testing.T) {}

func TestQuits(t *testing.T) {
	Quit()
	t.Fatal("unreachable")
}

func TestFailsLater(t *testing.T) { t.Fatal("would fail") }
