"""The static audit's rules for Go: where a patch's Go code reaches into the test runner
(the test binary's own `testing` package, its report channel) or around it.

What a Go submission's code can do in the test binary (docs/runners/go.md says what the
runner closes and what it leaves): read its own memory (/proc/self/mem, `unsafe`) for the
report key, rewrite a test's state or the testing package's code through `unsafe` and
`reflect` (a blanket flip: testing.(*common).Failed patched to return false), reach
unexported symbols by `//go:linkname`, write to inherited descriptors, end the process
before the report does. None of it is needed by a library, and each is one line to read.

    SUFFIXES          the file endings these rules read (Go sources, Go assembly)
    RULES             rule -> patterns over one added line, for every file of SUFFIXES
    TEST_FILE_RULES   more patterns for the lines of a *_test.go file (an init() or a
                      TestMain there runs around the hidden tests: the runner restores
                      every _test.go to the base, so such a line is an attempt, flagged);
                      `test-files` (a test's path in a string) is for library code only
    PATH_RULES        rule -> a pattern over a path the patch writes
    rules_for(path)   the line rules that apply to a path

A heuristic, as the Python rules are (grader/audit.py): it makes the usual tricks visible,
and the signed report, the canaries and the protected paths are the other layers.
"""

from __future__ import annotations

import re

SUFFIXES: tuple[str, ...] = (".go", ".s")

_TESTING_INTERNALS = (
    "common|InternalTest|InternalExample|InternalBenchmark|InternalFuzzTarget|MainStart|RunTests|RunExamples"
    "|RunBenchmarks|testDeps|tRunner|fRunner"
)
# unexported fields of testing.common a reflective write would aim at
_COMMON_FIELDS = (
    "failed|skipped|finished|done|ran|hasSub|chatty|output|parent|sub|raceErrors|runner|isParallel|barrier|signal"
    "|cleanups|cleanupName|helperPCs|level|creator|name|start|duration|o|w|mu"
)

RULES: dict[str, list[re.Pattern[str]]] = {
    "runner-internals": [
        re.compile(rf"\btesting\s*\.\s*({_TESTING_INTERNALS})\b"),
        re.compile(r"\*\s*testing\s*\.\s*M\b"),  # a TestMain's or MainStart's *testing.M outside the tests
        re.compile(r"\btesting/internal/|\binternal/graderkey\b|\bgrader(TakeKey|Report|Emit|End|Test|Main)\b"),
        re.compile(r"\bGRADER_(REPORT|KEY)_FD\b"),
        re.compile(rf"\bFieldByName\s*\(\s*\"({_COMMON_FIELDS})\"\s*\)"),
        re.compile(r"\breflect\s*\.\s*(ValueOf|TypeOf|NewAt)\s*\([^)]*\btesting\s*\."),
        re.compile(r"\"testing\.\(\*(common|T|B|F|M)\)\.\w+\""),  # a symbol name looked up in the binary
    ],
    "linkname": [
        re.compile(r"//\s*go:linkname\b"),
        # assembly naming another package's symbol (its path with ∕ for /): the runtime's, testing's
        re.compile(r"\b(testing|runtime|syscall|os|internal∕[\w∕]+)·"),
    ],
    "unsafe": [
        re.compile(r"^\s*(import\s+)?((?!return\b|case\b)\w+\s+)?\"unsafe\"\s*(//.*)?$"),
        re.compile(r"\bunsafe\s*\.\s*(Pointer|Add|Slice|String|StringData|SliceData|Offsetof)\b"),
        re.compile(r"\.\s*(UnsafeAddr|UnsafePointer)\s*\(\s*\)"),
        re.compile(r"\breflect\s*\.\s*NewAt\b"),
    ],
    "process-exit": [
        re.compile(r"\bos\s*\.\s*Exit\s*\("),
        re.compile(r"\b(syscall|unix)\s*\.\s*(Exit|Kill|Tgkill|Tkill|Kill)\s*\("),
        re.compile(r"\bruntime\s*\.\s*(Goexit|Breakpoint)\s*\("),
        re.compile(r"\b(os\s*\.\s*)?FindProcess\s*\(|\.\s*Signal\s*\(\s*(os|syscall)\s*\.\s*(Kill|Interrupt|SIGKILL)"),
        re.compile(r"\bsignal\s*\.\s*(Notify|Ignore)\s*\("),
    ],
    "descriptors": [
        re.compile(r"/proc/"),
        re.compile(r"/dev/fd\b"),
        re.compile(r"\bos\s*\.\s*NewFile\s*\("),
        re.compile(
            r"\b(syscall|unix)\s*\.\s*(Dup|Dup2|Dup3|Pread|Pwrite|Write|Read|Close|Open|Openat|Mprotect|Mmap"
            r"|Syscall|Syscall6|RawSyscall|RawSyscall6|PtraceAttach|PtracePeekData|PtracePokeData|PidfdGetfd"
            r"|ProcessVMReadv|ProcessVMWritev)\b"
        ),
    ],
    # a path of the tests in library code: a hidden test or its data, removed or rewritten at run time
    "test-files": [re.compile(r"\"[^\"]*(_test\.go|\btestdata/)[^\"]*\"")],
    "native-code": [
        re.compile(r"^\s*import\s+\"C\"|^\s*\"C\"\s*$"),
        re.compile(r"^\s*#cgo\b|//\s*go:cgo_"),
        re.compile(r"\bdebug\s*/\s*elf\b|\belf\s*\.\s*(Open|NewFile)\s*\("),  # reading its own executable's symbols
    ],
    "frame-tricks": [
        re.compile(r"\bruntime\s*\.\s*(Callers|CallersFrames|FuncForPC)\b"),
        re.compile(r"\bruntime\s*\.\s*Stack\s*\([^,]+,\s*true\s*\)"),  # every goroutine's stack
        re.compile(r"\bdebug\s*\.\s*(SetTraceback|WriteHeapDump)\b"),
    ],
}

TEST_FILE_RULES: dict[str, list[re.Pattern[str]]] = {
    "test-init": [re.compile(r"^\s*func\s+init\s*\(\s*\)")],
    "test-main": [re.compile(r"^\s*func\s+TestMain\s*\(")],
}

PATH_RULES: dict[str, re.Pattern[str]] = {
    # what the go command reads by itself: restored to the base by the runner whatever the patch does
    "runner-files": re.compile(
        r"(^|/)(go\.mod|go\.sum|go\.work|go\.work\.sum)$|(^|/)vendor/|_test\.go$|(^|/)testdata/"
    ),
    "native-code": re.compile(r"\.syso$|\.(c|cc|cpp|cxx|h|hh|hpp|m|S|swig|swigcxx)$"),
}


def rules_for(path: str) -> dict[str, list[re.Pattern[str]]]:
    """The line rules for a file the patch writes (none for a file these rules do not read)."""
    if not path.endswith(SUFFIXES):
        return {}
    if path.endswith("_test.go"):  # tests name their own files and testdata/ as a matter of course
        return {**{k: v for k, v in RULES.items() if k != "test-files"}, **TEST_FILE_RULES}
    return RULES
