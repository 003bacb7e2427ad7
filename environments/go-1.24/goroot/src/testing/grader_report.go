// Added to this image's GOROOT by the grader (environments/go-1.24).

package testing

// The grader's report channel, spoken by the test binary itself: one signed record per
// test, subtest, fuzz test and example as it finishes, and a last record with the exit
// status M.Run returns. Outcomes never come from the binary's output (`--- PASS: ...`,
// test2json's ^V framing), which the code under test can print as well.
//
// The runtime took the channel before any package was initialised (runtime/
// grader_report.go): the report descriptor (close-on-exec) and the key, read from its
// descriptor, which is closed, with both variables gone from the environment. Package
// internal/graderkey hands them over; the key is copied here and wiped there.
//
// Each record is one line, `<json>\t<mac>\n`: json is compact, with sorted keys, and
// carries "s", this process's session id (16 random hex digits); mac is the hex
// HMAC-SHA256, keyed by the 32 key bytes, of the previous record's mac (empty for the
// first) followed by json. Records:
//
//	{"pid":N,"s":S,"t":"start"}                                   at package init
//	{"d":SECONDS,"id":"TestX/sub","outcome":"passed"|"failed"|"skipped","pkg":IMPORT_PATH,"s":S,"t":"test","when":"call"}
//	{"collected":N,"exit":STATUS,"s":S,"t":"end"}                 when M.Run returns
//
// A test that panics ends the process: its record and its parents' say failed, then
// "end" says 2 (the status of a Go program dying of a panic). Nothing is written after
// "end". A process that exits otherwise (os.Exit, syscall.Exit, a panic in a goroutine
// of its own, a signal, the -test.timeout alarm) leaves a session with no "end".

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"internal/graderkey"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

var grader struct {
	mu      sync.Mutex
	fd      int // the report descriptor; -1: no channel (or it broke)
	key     []byte
	session string
	prev    []byte // the previous record's mac, hex
	pkg     string // the import path of the package under test
	count   int    // test records written
	ended   bool
}

func init() {
	grader.fd = -1
	if graderkey.ReportFD < 0 || len(graderkey.Secret) < 32 {
		return
	}
	grader.fd = graderkey.ReportFD
	grader.key = append([]byte(nil), graderkey.Secret[:32]...)
	clear(graderkey.Secret)
	graderkey.Secret, graderkey.ReportFD = nil, -1
	grader.session = strconv.FormatUint(rand.Uint64()|1<<63, 16)[:16]
	graderEmit("start", false, graderField{"pid", strconv.Itoa(os.Getpid())})
}

// graderMain is called by MainStart: the import path of the package under test
// (set by the go command, as for the fuzzing cache).
func graderMain(deps testDeps) {
	grader.mu.Lock()
	grader.pkg = deps.ImportPath()
	grader.mu.Unlock()
}

// graderReport is called by (*T).report and (*F).report, when a test and all its
// subtests are done.
func graderReport(c *common) {
	outcome := "passed"
	if c.Failed() {
		outcome = "failed"
	} else if c.Skipped() {
		outcome = "skipped"
	}
	graderTest(c.name, outcome, c.duration)
}

// graderPanicked is called where tRunner and fRunner are about to let a test's panic
// (or its stray runtime.Goexit) end the process: the test and its parents failed.
func graderPanicked(c *common) {
	for node := c; node != nil && node.parent != nil; node = node.parent {
		graderTest(node.name, "failed", node.duration)
	}
	graderEnd(2)
}

// graderExample is called when an example has run; dying: it panicked, and the panic
// goes on to end the process.
func graderExample(name string, passed bool, d time.Duration, dying bool) {
	outcome := "failed"
	if passed && !dying {
		outcome = "passed"
	}
	graderTest(name, outcome, d)
	if dying {
		graderEnd(2)
	}
}

// graderEnd is called when M.Run returns its exit status.
func graderEnd(code int) {
	grader.mu.Lock()
	n := grader.count
	grader.mu.Unlock()
	graderEmit("end", true, graderField{"collected", strconv.Itoa(n)}, graderField{"exit", strconv.Itoa(code)})
}

func graderTest(name, outcome string, d time.Duration) {
	secs := math.Round(d.Seconds()*1e4) / 1e4
	grader.mu.Lock()
	pkg := grader.pkg
	grader.mu.Unlock()
	graderEmit("test", false,
		graderField{"d", strconv.FormatFloat(secs, 'f', -1, 64)},
		graderField{"id", graderQuote(name)},
		graderField{"outcome", graderQuote(outcome)},
		graderField{"pkg", graderQuote(pkg)},
		graderField{"when", `"call"`},
	)
}

// graderField is one key of a record and its value as JSON text.
type graderField struct{ k, v string }

func graderEmit(kind string, last bool, fields ...graderField) {
	grader.mu.Lock()
	defer grader.mu.Unlock()
	if grader.fd < 0 || grader.ended {
		return
	}
	fields = append(fields, graderField{"s", graderQuote(grader.session)}, graderField{"t", graderQuote(kind)})
	slices.SortFunc(fields, func(a, b graderField) int { return strings.Compare(a.k, b.k) })
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(graderQuote(f.k))
		b.WriteByte(':')
		b.WriteString(f.v)
	}
	b.WriteByte('}')
	body := b.String()
	mac := hmac.New(sha256.New, grader.key)
	mac.Write(grader.prev)
	mac.Write([]byte(body))
	grader.prev = []byte(hex.EncodeToString(mac.Sum(nil)))
	line := []byte(body + "\t" + string(grader.prev) + "\n")
	if kind == "test" {
		grader.count++
	}
	if last {
		grader.ended = true
	}
	for len(line) > 0 {
		n, err := syscall.Write(grader.fd, line)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil || n <= 0 {
			grader.fd = -1 // the channel is gone: the run ends without a report
			return
		}
		line = line[n:]
	}
}

// graderQuote is s as a JSON string, ASCII only (as Python's json.dumps writes it).
func graderQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || (r > 0x7e && r < 0x10000):
			graderHex4(&b, r)
		case r >= 0x10000 && r <= utf8.MaxRune:
			r -= 0x10000
			graderHex4(&b, 0xd800+(r>>10))
			graderHex4(&b, 0xdc00+(r&0x3ff))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func graderHex4(b *strings.Builder, r rune) {
	const digits = "0123456789abcdef"
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(digits[(r>>uint(shift))&0xf])
	}
}
