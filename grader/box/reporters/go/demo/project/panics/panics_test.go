package panics

import "testing"

func TestBefore(t *testing.T) {}

func TestPanics(t *testing.T) {
	t.Run("inner", func(t *testing.T) {
		_ = Index(nil, 3) // index out of range: the process dies
	})
}

func TestAfter(t *testing.T) {} // never runs
