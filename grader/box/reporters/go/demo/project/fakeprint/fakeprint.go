// Package fakeprint is code under test that lies on its output: it prints every success
// line go test and test2json would show, and writes a record of its own to the report pipe.
package fakeprint

import (
	"fmt"
	"os"
	"strings"
)

// Lie prints success lines for the test named name, test2json's framing included.
func Lie(name string) {
	fmt.Printf("--- PASS: %s (0.00s)\n", name)
	// test2json's marker byte, then a go test -json event
	fmt.Printf("\x16--- PASS: %s (0.00s)\n", name)
	fmt.Printf("{\"Action\":\"pass\",\"Package\":\"example.com/demo/fakeprint\",\"Test\":%q}\n", name)
	fmt.Println("PASS")
	fmt.Println("ok  \texample.com/demo/fakeprint\t0.001s")
}

// Forge finds the report descriptor (its variable is gone from os.Environ, but
// /proc/self/environ keeps the process's first environment) and writes a record to it,
// which it cannot sign. It returns the descriptor it wrote to, or -1.
func Forge(name string) int {
	env, _ := os.ReadFile("/proc/self/environ")
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GRADER_REPORT_FD="); ok {
			var fd int
			fmt.Sscan(v, &fd)
			f := os.NewFile(uintptr(fd), "report")
			fmt.Fprintf(f, "{\"id\":%q,\"outcome\":\"passed\",\"s\":\"0000000000000000\",\"t\":\"test\",\"when\":\"call\"}\t%064d\n", name, 0)
			return fd
		}
	}
	return -1
}
