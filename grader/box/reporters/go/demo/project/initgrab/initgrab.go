// Package initgrab is code under test that goes for the key in its init, the earliest
// point any package's code runs, before package testing's own init.
package initgrab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Seen says what init found.
var Seen []string

func init() {
	for _, name := range []string{"GRADER_KEY_FD", "GRADER_REPORT_FD"} {
		if v, ok := os.LookupEnv(name); ok {
			Seen = append(Seen, "os.Getenv: "+name+"="+v)
		}
	}
	env, _ := os.ReadFile("/proc/self/environ")
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "GRADER_KEY_FD="); ok {
			fd, _ := strconv.Atoi(v)
			buf := make([]byte, 64)
			n, err := syscall.Pread(fd, buf, 0)
			if err == nil && n > 0 {
				Seen = append(Seen, fmt.Sprintf("read %d key bytes from descriptor %d", n, fd))
			} else {
				Seen = append(Seen, fmt.Sprintf("descriptor %d (from /proc/self/environ): %v", fd, err))
			}
		}
	}
}
