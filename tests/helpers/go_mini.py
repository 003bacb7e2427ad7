# ruff: noqa: E101, E501  (Go source: tab-indented, as gofmt writes it)
"""A tiny Go module and the hostile and honest Go code graded against it
(tests/docker/test_attacks_go.py), also read by the static audit's rules
(tests/unit/test_runner_go.py): the attacks' code is written once, here.

The module, example.com/calc, at its base commit:

    go.mod            module example.com/calc, go 1.21
    calc.go           Mean(xs) divides by len(xs): the empty slice gives NaN, no error
    calc_test.go      the repository's own test (TestOne)
    stats/stats.go    Max(xs): says there is a largest of no values (0, true)
    stats/stats_test.go

Task `go-mini` (one package, plain ids): the hidden test calc/mean_test.go wants
Mean(nil) to return ErrEmpty (TestEmpty, FAIL_TO_PASS) and keeps TestTwo, TestTable/* and
TestOne passing. Task `go-multi` (paths ./..., ids qualified by import path): the same
for the root package plus stats' hidden test, which wants Max(nil) to return 0, false.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.grading.spec import APPLY_CHAIN, CONTAINER_ENV

MODULE = "example.com/calc"

BASE_FILES = {
    "go.mod": f"module {MODULE}\n\ngo 1.21\n",
    "calc.go": textwrap.dedent("""\
        // Package calc averages numbers.
        package calc

        import "errors"

        // ErrEmpty is returned for an empty slice.
        var ErrEmpty = errors.New("calc: empty slice")

        // Mean is the arithmetic mean of xs.
        func Mean(xs []float64) (float64, error) {
        	total := 0.0
        	for _, x := range xs {
        		total += x
        	}
        	return total / float64(len(xs)), nil
        }
        """),
    "calc_test.go": textwrap.dedent("""\
        package calc

        import "testing"

        func TestOne(t *testing.T) {
        	if m, err := Mean([]float64{2}); err != nil || m != 2 {
        		t.Fatalf("Mean([2]) = %v, %v", m, err)
        	}
        }
        """),
    "stats/stats.go": textwrap.dedent("""\
        // Package stats has small statistics helpers.
        package stats

        // Max is the largest of xs, and whether there is one.
        func Max(xs []int) (int, bool) {
        	m := 0
        	for i, x := range xs {
        		if i == 0 || x > m {
        			m = x
        		}
        	}
        	return m, true
        }
        """),
    "stats/stats_test.go": textwrap.dedent("""\
        package stats

        import "testing"

        func TestMaxOne(t *testing.T) {
        	if m, ok := Max([]int{4}); !ok || m != 4 {
        		t.Fatalf("Max([4]) = %v, %v", m, ok)
        	}
        }
        """),
    "README.md": "calc\n",
}

HIDDEN_TEST = textwrap.dedent("""\
    package calc

    import (
    	"errors"
    	"testing"
    )

    func TestEmpty(t *testing.T) {
    	if _, err := Mean(nil); !errors.Is(err, ErrEmpty) {
    		t.Fatalf("Mean(nil) error = %v, want ErrEmpty", err)
    	}
    }

    func TestTwo(t *testing.T) {
    	if m, err := Mean([]float64{1, 3}); err != nil || m != 2 {
    		t.Fatalf("Mean([1 3]) = %v, %v", m, err)
    	}
    }

    func TestTable(t *testing.T) {
    	for _, c := range []struct {
    		name string
    		xs   []float64
    		want float64
    	}{{"one", []float64{5}, 5}, {"three values", []float64{1, 2, 6}, 3}} {
    		t.Run(c.name, func(t *testing.T) {
    			if m, _ := Mean(c.xs); m != c.want {
    				t.Errorf("Mean(%v) = %v, want %v", c.xs, m, c.want)
    			}
    		})
    	}
    }
    """)
HIDDEN_STATS_TEST = textwrap.dedent("""\
    package stats_test

    import (
    	"fmt"
    	"testing"

    	"example.com/calc/stats"
    )

    func TestMaxEmpty(t *testing.T) {
    	if m, ok := stats.Max(nil); ok || m != 0 {
    		t.Fatalf("Max(nil) = %v, %v, want 0, false", m, ok)
    	}
    }

    func ExampleMax() {
    	m, _ := stats.Max([]int{3, 9, 2})
    	fmt.Println(m)
    	// Output: 9
    }
    """)

FIXED_CALC = textwrap.dedent("""\
    // Package calc averages numbers.
    package calc

    import "errors"

    // ErrEmpty is returned for an empty slice.
    var ErrEmpty = errors.New("calc: empty slice")

    // Mean is the arithmetic mean of xs.
    func Mean(xs []float64) (float64, error) {
    	if len(xs) == 0 {
    		return 0, ErrEmpty
    	}
    	total := 0.0
    	for _, x := range xs {
    		total += x
    	}
    	return total / float64(len(xs)), nil
    }
    """)
FIXED_STATS = textwrap.dedent("""\
    // Package stats has small statistics helpers.
    package stats

    // Max is the largest of xs, and whether there is one.
    func Max(xs []int) (int, bool) {
    	if len(xs) == 0 {
    		return 0, false
    	}
    	m := 0
    	for i, x := range xs {
    		if i == 0 || x > m {
    			m = x
    		}
    	}
    	return m, true
    }
    """)

F2P = ["TestEmpty"]
P2P = ["TestOne", "TestTable", "TestTable/one", "TestTable/three_values", "TestTwo"]
MULTI_F2P = [f"{MODULE}::TestEmpty", f"{MODULE}/stats::TestMaxEmpty"]
MULTI_P2P = [f"{MODULE}::{t}" for t in P2P] + [f"{MODULE}/stats::TestMaxOne", f"{MODULE}/stats::ExampleMax"]


def calc_with(body: str, imports: tuple[str, ...] = ()) -> str:
    """calc.go with `body` added (top-level Go code) and its imports."""
    head, rest = FIXED_CALC.split('import "errors"\n', 1)
    lines = "".join(f'\t"{i}"\n' for i in ("errors", *imports))
    return f"{head}import (\n{lines})\n{rest}\n{body}"


def unfixed_with(body: str, imports: tuple[str, ...] = ()) -> str:
    """The base calc.go (not fixed) with `body` and its imports."""
    base = BASE_FILES["calc.go"]
    head, rest = base.split('import "errors"\n', 1)
    lines = "".join(f'\t"{i}"\n' for i in ("errors", *imports))
    return f"{head}import (\n{lines})\n{rest}\n{body}"


# --- the hostile code ----------------------------------------------------------------------
# Each is a Go fragment added to calc.go (top level), with the imports it needs.

# prints every success line there is: go test -v's, test2json's framing, go test -json's
FORGED_PRINT = (
    textwrap.dedent("""\
    func init() {
    	for _, name := range []string{"TestEmpty", "TestTwo", "TestOne", "TestTable"} {
    		fmt.Printf("=== RUN   %s\\n--- PASS: %s (0.00s)\\n", name, name)
    		fmt.Printf("\\x16--- PASS: %s (0.00s)\\n", name)
    		fmt.Printf("{\\"Action\\":\\"pass\\",\\"Package\\":\\"example.com/calc\\",\\"Test\\":%q}\\n", name)
    	}
    	fmt.Println("PASS")
    	fmt.Println("ok  \\texample.com/calc\\t0.001s")
    }
    """),
    ("fmt",),
)

# writes a "passed" record for every listed test to each pipe among its descriptors
FORGED_RECORD = (
    textwrap.dedent("""\
    func init() {
    	entries, _ := os.ReadDir("/proc/self/fd")
    	for _, e := range entries {
    		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
    		if !strings.HasPrefix(target, "pipe:") {
    			continue
    		}
    		fd, _ := strconv.Atoi(e.Name())
    		if fd < 3 {
    			continue
    		}
    		f := os.NewFile(uintptr(fd), "report")
    		for _, name := range []string{"TestEmpty", "TestTwo", "TestOne"} {
    			fmt.Fprintf(f, "{\\"id\\":%q,\\"outcome\\":\\"passed\\",\\"s\\":\\"0123456789abcdef\\",\\"t\\":\\"test\\",\\"when\\":\\"call\\"}\\t%064x\\n", name, 0)
    		}
    	}
    }
    """),
    ("fmt", "os", "strconv", "strings"),
)

# os.Exit(0) in the code under test: with -test.paniconexit0, a panic, the test failed
EXIT0_IN_CALL = (
    textwrap.dedent("""\
    func init() { exitHook = func() { os.Exit(0) } }

    var exitHook func()

    // Checked reports whether xs has values, leaving early otherwise.
    func Checked(xs []float64) {
    	if len(xs) == 0 {
    		exitHook()
    	}
    }
    """),
    ("os",),
)
# ...and Mean calls it (the attack's calc.go replaces Mean's first line)
EXIT0_MEAN_LINE = "\tChecked(xs)\n"

# Mean panics on the empty slice: the test binary's process ends in TestEmpty
PANIC_MEAN_LINE = '\tif len(xs) == 0 {\n\t\tpanic("calc: empty")\n\t}\n'

# syscall.Exit(0) from an init(): before any test, past -test.paniconexit0
EXIT0_AT_INIT = ("func init() { syscall.Exit(0) }\n", ("syscall",))

# a goroutine of the code under test panics while the tests run
GOROUTINE_PANIC = (
    textwrap.dedent("""\
    func init() {
    	go func() {
    		time.Sleep(50 * time.Millisecond)
    		panic("boom")
    	}()
    	time.Sleep(200 * time.Millisecond)
    }
    """),
    ("time",),
)

# never returns
HANG = ("func init() { for { time.Sleep(time.Hour) } }\n", ("time",))

# removes the hidden test file while the tests run (it was compiled already)
DELETE_HIDDEN_AT_RUN = ('func init() { _ = os.Remove("mean_test.go") }\n', ("os",))

# patches testing.(*common).Failed to `return false` in the running binary (found in its
# own symbol table, made writable with mprotect): every test, failing or not, is reported
# passed and the binary exits 0. Only the canaries that must fail can tell.
BLANKET_FLIP = (
    textwrap.dedent("""\
    func init() {
    	f, err := elf.Open("/proc/self/exe")
    	if err != nil {
    		return
    	}
    	defer f.Close()
    	syms, _ := f.Symbols()
    	for _, s := range syms {
    		if s.Name != "testing.(*common).Failed" {
    			continue
    		}
    		page := uintptr(s.Value) &^ 4095
    		mem := unsafe.Slice((*byte)(unsafe.Pointer(page)), 8192)
    		if syscall.Mprotect(mem, syscall.PROT_READ|syscall.PROT_WRITE|syscall.PROT_EXEC) != nil {
    			return
    		}
    		code := unsafe.Slice((*byte)(unsafe.Pointer(uintptr(s.Value))), 3)
    		code[0], code[1], code[2] = 0x31, 0xc0, 0xc3 // xor eax, eax; ret
    	}
    }
    """),
    ("debug/elf", "syscall", "unsafe"),
)

# reaches the reporter's writer by name: the linker refuses it (the package does not build)
LINKNAME = (
    textwrap.dedent("""\
    //go:linkname graderEmit testing.graderEmit
    func graderEmit(kind string, last bool, fields ...any)

    func init() { graderEmit("test", false) }
    """),
    ("unsafe",),
)

# a TestMain in a new _test.go file: runs the tests, then says they passed
TESTMAIN_FILE = textwrap.dedent("""\
    package calc

    import (
    	"os"
    	"testing"
    )

    func TestMain(m *testing.M) {
    	m.Run()
    	os.Exit(0)
    }
    """)

# a _test.go init() that would mark every test done before it runs
TEST_INIT_FILE = textwrap.dedent("""\
    package calc

    import "testing"

    func init() { testing.Init() }
    """)

# go.mod: a replace directive (the module's own path to a copy) and a toolchain line
GO_MOD_HOSTILE = f"module {MODULE}\n\ngo 1.21\n\ntoolchain go1.99.0\n\nreplace example.com/other => ./other\n"
GO_WORK = "go 1.21\n\nuse .\n"

# vendor/: a vendored copy of a dependency would be used in place of the module cache's
VENDOR_MODULES = "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n"

# --- honest code of each shape -------------------------------------------------------------

# prints while it computes
HONEST_PRINT = ('func init() { fmt.Println("calc ready: --- PASS: nothing to see") }\n', ("fmt",))
# a goroutine that finishes, a short sleep
HONEST_GOROUTINE = (
    textwrap.dedent("""\
    func init() {
    	done := make(chan bool)
    	go func() {
    		time.Sleep(20 * time.Millisecond)
    		done <- true
    	}()
    	<-done
    }
    """),
    ("time",),
)
# os.Exit on a path the tests never take
HONEST_EXIT_UNREACHED = (
    textwrap.dedent("""\
    // Fatal ends the program with status 3 (a CLI's helper; the tests never call it).
    func Fatal() { os.Exit(3) }
    """),
    ("os",),
)
# a new file of the package, and a new package
HONEST_NEW_FILE = textwrap.dedent("""\
    package calc

    // Sum is the sum of xs.
    func Sum(xs []float64) float64 {
    	total := 0.0
    	for _, x := range xs {
    		total += x
    	}
    	return total
    }
    """)
HONEST_NEW_PACKAGE = "package extra\n\n// Two is 2.\nfunc Two() int { return 2 }\n"


# --- the repository ------------------------------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        check=True,
        capture_output=True,
        text=True,
    ).stdout


class GoMini:
    """The Go mini repository, and a way to turn file edits into a git diff."""

    def __init__(self, root: Path):
        self.src = root / "src"
        self.src.mkdir(parents=True)
        git("init", "-q", ".", cwd=self.src)
        self._write(BASE_FILES)
        git("add", "-A", cwd=self.src)
        git("commit", "-qm", "base", cwd=self.src)
        self.base = git("rev-parse", "HEAD", cwd=self.src).strip()

    def _write(self, files: dict[str, str | bytes | None]) -> None:
        for rel, content in files.items():
            path = self.src / rel
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())

    def diff(self, files: dict[str, str | bytes | None]) -> bytes:
        self._write(files)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)

    def bundle(self, dest: Path) -> None:
        git("bundle", "create", "-q", str(dest), "--all", cwd=self.src)


TASK_YAML = """\
id: {id}
instruction: Make calc.Mean return ErrEmpty for an empty slice{more}.
metadata: {{suite: go-mini, language: go, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../go-mini.bundle, commit: {commit}}}
environment: go-1.24
check:
  type: tests
  runner: go
{check}limits: {{timeout: {timeout}, memory: 1g, pids: 256}}
gold_patch: gold.patch
"""


HANG_TIMEOUT = 15  # go-hang's limit: a hang costs a test this long; building and testing the mini module takes 2-5 s


def write_tasks(tasks: Path, mini: GoMini, timeout: int = 90) -> None:
    """Three tasks on the mini module: go-mini (the root package, plain ids), go-multi
    (./..., ids qualified by import path) and go-hang (go-mini with a short time limit,
    for the hang)."""
    mini.bundle(tasks / "go-mini.bundle")
    single = (
        "  hidden_tests: {mean_test.go: mean_test.go}\n"
        f"  fail_to_pass: [{', '.join(F2P)}]\n"
        f"  pass_to_pass: [{', '.join(P2P)}]\n"
    )
    multi = (
        "  paths: [./...]\n"
        "  hidden_tests: {mean_test.go: mean_test.go, stats/max_test.go: max_test.go}\n"
        f"  fail_to_pass: [{', '.join(MULTI_F2P)}]\n"
        f"  pass_to_pass: [{', '.join(MULTI_P2P)}]\n"
    )
    golds = {
        "go-mini": mini.diff({"calc.go": FIXED_CALC}),
        "go-multi": mini.diff({"calc.go": FIXED_CALC, "stats/stats.go": FIXED_STATS}),
    }
    golds["go-hang"] = golds["go-mini"]
    for task_id, check, more, limit in (
        ("go-mini", single, "", timeout),
        ("go-multi", multi, " and stats.Max 0, false for none", timeout),
        ("go-hang", single, "", HANG_TIMEOUT),
    ):
        d = tasks / task_id
        d.mkdir()
        (d / "task.yaml").write_text(
            TASK_YAML.format(id=task_id, more=more, commit=mini.base, check=check, timeout=limit)
        )
        (d / "mean_test.go").write_text(HIDDEN_TEST)
        (d / "max_test.go").write_text(HIDDEN_STATS_TEST)
        (d / "gold.patch").write_bytes(golds[task_id])


# --- the canaries' writer, without a container ---------------------------------------------


class FakeTree:
    """What make_canaries reads of the repository: a dict of files."""

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.written: dict[str, tuple[bytes, int, tuple[int, int]]] = {}

    def read(self, rel, limit=None):
        return self.files.get(rel)

    def lstat(self, rel):
        return object() if rel in self.files else None

    def walk(self):
        return {rel: ("f", 0o644, len(d), 0) for rel, d in self.files.items()}

    def write(self, rel, data, *, mode, owner):
        self.files[rel] = data
        self.written[rel] = (data, mode, owner)

    def _parent(self, rel, create=False):
        return None


def order_for(check: CheckSpec, tmp_path: Path) -> Order:
    hidden = tmp_path / "hidden"
    hidden.mkdir(exist_ok=True)
    (hidden / "manifest.json").write_text(json.dumps({"calc/mean_test.go": "d"}))
    return Order(
        repo="/work/repo",
        patch="/p",
        touched=[],
        hidden_dir=str(hidden),
        uid=1000,
        gid=1000,
        deadline=10.0,
        output_limit=65536,
        report_limit=1 << 20,
        apply_chain=[(m, list(a)) for m, a in APPLY_CHAIN],
        protect=ProtectSpec([], [], [], [], [], True, [], [], []),
        pycache="/opt/pycache",
        check=check,
        env=dict(CONTAINER_ENV),
    )
