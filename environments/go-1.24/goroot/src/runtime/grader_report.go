// Added to this image's GOROOT by the grader (environments/go-1.24).

//go:build linux

package runtime

import (
	"internal/goarch"
	"internal/graderkey"
	"internal/runtime/syscall"
	"unsafe"
)

// pread64 on the architectures this image supports; 0 elsewhere (no key is read there,
// so no record is written: a run there ends without a report).
const graderSysPread = 17*goarch.IsAmd64 + 67*goarch.IsArm64

// graderTakeKey takes the grader's report channel out of reach of the program: main calls
// it after the runtime's own packages are initialised and before any other package's
// variables or init functions, so no code of the program or of its dependencies runs
// before it. It removes GRADER_REPORT_FD and GRADER_KEY_FD from the environment the
// program sees (os.Getenv, os.Environ and every child process: they copy this list
// later), reads the key file whole with pread at offset 0 (other processes may share
// the descriptor), closes it, and makes the report descriptor close-on-exec. Package
// testing finds the report descriptor and the secret in internal/graderkey.
func graderTakeKey() {
	reportFD, keyFD := -1, -1
	var kept []string
	for i, kv := range envs {
		fd, name := -1, ""
		if len(kv) > len("GRADER_REPORT_FD=") && kv[:len("GRADER_REPORT_FD=")] == "GRADER_REPORT_FD=" {
			name = "report"
			if n, ok := atoi(kv[len("GRADER_REPORT_FD="):]); ok && n >= 0 {
				fd = n
			}
		} else if len(kv) > len("GRADER_KEY_FD=") && kv[:len("GRADER_KEY_FD=")] == "GRADER_KEY_FD=" {
			name = "key"
			if n, ok := atoi(kv[len("GRADER_KEY_FD="):]); ok && n >= 0 {
				fd = n
			}
		}
		if name == "" {
			if kept != nil {
				kept = append(kept, kv)
			}
			continue
		}
		if kept == nil {
			kept = make([]string, i, len(envs))
			copy(kept, envs[:i])
		}
		if name == "report" {
			reportFD = fd
		} else {
			keyFD = fd
		}
	}
	if kept == nil {
		return // neither variable: nothing to do
	}
	envs = kept
	var secret []byte
	if keyFD >= 0 {
		if graderSysPread != 0 {
			buf := make([]byte, 0, 4096)
			for len(buf) < 1<<20 {
				if len(buf) == cap(buf) {
					grown := make([]byte, len(buf), 2*cap(buf))
					copy(grown, buf)
					buf = grown
				}
				room := buf[len(buf):cap(buf)]
				n, _, errno := syscall.Syscall6(graderSysPread, uintptr(keyFD), uintptr(unsafe.Pointer(&room[0])), uintptr(len(room)), uintptr(len(buf)), 0, 0)
				if errno == 4 { // EINTR
					continue
				}
				if errno != 0 || n == 0 {
					break
				}
				buf = buf[:len(buf)+int(n)]
			}
			secret = buf
		}
		closefd(int32(keyFD))
	}
	if reportFD >= 0 {
		closeonexec(int32(reportFD))
	}
	if reportFD >= 0 && len(secret) >= 32 {
		graderkey.ReportFD = reportFD
		graderkey.Secret = secret
	}
}
