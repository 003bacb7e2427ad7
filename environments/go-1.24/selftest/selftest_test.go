package selftest

import (
	"fmt"
	"testing"
)

func TestPass(t *testing.T) {}

func TestFail(t *testing.T) {
	fmt.Println("--- PASS: TestFail (0.00s)")
	t.Fail()
}

func TestSkip(t *testing.T) { t.Skip() }

func TestSub(t *testing.T) {
	t.Run("a b", func(t *testing.T) {})
}
