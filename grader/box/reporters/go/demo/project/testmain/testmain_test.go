package testmain

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	m.Run()
	os.Exit(0) // the tests failed: status 0 all the same
}

func TestTwo(t *testing.T) {
	if Two() != 2 {
		t.Error("Two() is not 2")
	}
}
