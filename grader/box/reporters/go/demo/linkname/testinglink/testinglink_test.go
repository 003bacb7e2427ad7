// Package testinglink calls the reporter's own writer with //go:linkname: the linker refuses.
package testinglink

import (
	"testing"
	_ "unsafe"
)

type field struct{ k, v string }

//go:linkname emit testing.graderEmit
func emit(kind string, last bool, fields ...field)

func TestForge(t *testing.T) { emit("end", true, field{"exit", "0"}) }
