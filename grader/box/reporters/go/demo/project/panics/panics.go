// Package panics is code under test that panics.
package panics

func Index(xs []int, i int) int { return xs[i] }
