// Package gopanic is code under test that panics in a goroutine of its own.
package gopanic

func Later(done chan struct{}) {
	go func() {
		defer close(done)
		var m map[string]int
		m["x"] = 1 // assignment to a nil map: the process dies
	}()
}
