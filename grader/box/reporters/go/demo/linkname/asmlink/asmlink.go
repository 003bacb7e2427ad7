// Package asmlink reads the channel's secret from assembly: the linker refuses.
package asmlink

func secretLen() int

func SecretLen() int { return secretLen() }
