package fakeprint

import "testing"

// TestPrintsSuccess fails, after printing every success line there is.
func TestPrintsSuccess(t *testing.T) {
	Lie("TestPrintsSuccess")
	t.Fail()
	Lie("TestPrintsSuccess")
}

// TestForgesRecord fails, after writing an unsigned "passed" record to the report pipe.
func TestForgesRecord(t *testing.T) {
	if fd := Forge("TestForgesRecord"); fd < 0 {
		t.Log("no report descriptor found")
	}
	t.Fail()
}
