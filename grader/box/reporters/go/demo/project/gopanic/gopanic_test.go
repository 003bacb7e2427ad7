package gopanic

import "testing"

func TestBefore(t *testing.T) {}

func TestGoroutinePanics(t *testing.T) {
	done := make(chan struct{})
	Later(done)
	<-done
}
