// Package honest is code under test that behaves: its tests pass, fail and skip for real.
package honest

func Add(a, b int) int { return a + b }
