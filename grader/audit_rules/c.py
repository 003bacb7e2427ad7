"""The static audit's rules for C and C++: the ways library code can reach past the code under
test into the process that judges it (a native test's verdict is its exit status) or into the
runner's machinery. Each rule is a list of patterns over one line the patch adds to a file
whose name ends with one of SUFFIXES. A finding flags a grade (or fails it, as the host sets
GRADER_AUDIT); an honest patch may trip one (a CLI calls exit(), a library installs a signal
handler), so the rules name what a line reaches for, not that it cheats."""

from __future__ import annotations

import re

SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".inc", ".ipp", ".tpp")

RULES: dict[str, list[re.Pattern[str]]] = {
    # ending the process, or changing how it ends, from library code: the exit status is the
    # verdict, so exit(0) before a failing check passes the test
    "process-exit": [
        re.compile(r"(?<![\w.>])(std\s*::\s*)?(exit|_exit|_Exit|quick_exit|abort|terminate)\s*\("),
        re.compile(r"\b(atexit|at_quick_exit|on_exit|set_terminate|set_unexpected)\s*\("),
        re.compile(r"\b(kill|killpg|tgkill|pthread_kill|raise)\s*\(\s*(getpid|getppid|0|-1|SIG)"),
        re.compile(r"\bsyscall\s*\(\s*(SYS_|__NR_)(exit|exit_group|kill|tgkill)"),
    ],
    # signal handlers: a handler for SIGSEGV / SIGABRT that exits 0 turns a crash into a pass
    "signal-handlers": [
        re.compile(r"\b(signal|sigaction|sigset|bsd_signal|sysv_signal)\s*\("),
        re.compile(r"\bstruct\s+sigaction\b"),
        re.compile(r"\b(alarm|setitimer|timer_create)\s*\("),
    ],
    # code that runs before main() or after it, without being called
    "constructors": [
        re.compile(r"__attribute__\s*\(\(\s*(__)?(constructor|destructor)(__)?\b"),
        re.compile(r"\[\[\s*gnu\s*::\s*(constructor|destructor)\b"),
        re.compile(r"\bsection\s*\(\s*\"\.(init_array|fini_array|preinit_array|ctors|dtors|init|fini)\b"),
        re.compile(r"#\s*pragma\s+(init|fini)\b"),
        re.compile(r"\b(void|int)\s+_(init|fini)\s*\(\s*(void)?\s*\)"),
    ],
    # writing to descriptors the code did not open: the test's stdout/stderr, the runner's
    "descriptors": [
        re.compile(r"/proc/(self|thread-self|\d+|%d|\"|'|[A-Za-z_]\w*\s*[,)])"),
        re.compile(r"/dev/(fd|stdout|stderr|tty)\b"),
        re.compile(r"\b(dup2|dup3)\s*\("),
        re.compile(r"\b(write|close|fcntl|dup|fdopen|ioctl)\s*\(\s*(\d+|STDOUT_FILENO|STDERR_FILENO)\s*[,)]"),
        re.compile(r"\bfreopen\s*\(.*\b(stdout|stderr|stdin)\s*\)"),
        re.compile(r"\b(stdout|stderr)\s*=[^=]"),
    ],
    # loading code the build did not link, or interposing on symbols
    "dynamic-loading": [
        re.compile(r"\b(LD_PRELOAD|LD_LIBRARY_PATH|LD_AUDIT|LD_BIND_NOW|GCONV_PATH)\b"),
        re.compile(r"\b(dlopen|dlmopen|dlsym|dlvsym)\s*\("),
        re.compile(r"\bRTLD_(NEXT|DEFAULT)\b"),
        re.compile(r"\b(setenv|putenv|unsetenv)\s*\(\s*\"(LD_|GTEST_|CTEST_|GRADER_)"),
        re.compile(r"__attribute__\s*\(\(\s*(__)?(weak|alias|ifunc)(__)?\b"),
        re.compile(r"#\s*pragma\s+weak\b"),
        re.compile(r"\b__asm__\s*\(\s*\"\s*\.symver\b|\.symver\b"),
    ],
    # assembly: what no reviewer reads for what it does
    "assembly": [
        re.compile(r"\b(__asm__|__asm|asm)\s*(volatile|__volatile__|goto)?\s*\("),
        re.compile(r"\.incbin\b"),
    ],
    # other processes: the runner, the other tests, a debugger's grip on them
    "process-control": [
        re.compile(r"\b(ptrace|process_vm_writev|process_vm_readv|prctl|personality)\s*\("),
        re.compile(r"\b(fork|vfork|clone|clone3|daemon|setsid)\s*\("),
        re.compile(r"\b(system|popen|execl|execlp|execle|execv|execvp|execvpe|execve|fexecve|posix_spawnp?)\s*\("),
        re.compile(r"\b(setuid|seteuid|setreuid|setresuid|setgid|setegid|setregid|setresgid|chroot)\s*\("),
    ],
    # text that imitates a runner's verdict (nothing reads it here, but it is written to fool)
    "runner-output": [
        re.compile(r"\"[^\"]*(tests passed|\[\s+PASSED\s+\]|\[\s+OK\s+\]|:(global-)?test-result:|\bPASS:\s)"),
        re.compile(r"\"\s*(not )?ok \d+ - "),
        re.compile(r"\"[^\"]*-{4} \w+: passed"),
    ],
    # reaching into a test framework's own state or redefining its words
    "test-framework": [
        re.compile(
            r"#\s*(define|undef)\s+(main|assert|NDEBUG|TEST|TEST_F|TEST_P|ASSERT_\w+|EXPECT_\w+|TEST_ASSERT\w*|RUN_TEST|UNITY_\w+|CU_\w+|ck_assert\w*|check_\w+|FAIL|PASS|SUCCEED)\b"
        ),
        re.compile(r"\bUnity\s*\.\s*(TestFailures|CurrentTestFailed|NumberOfTests|TestIgnores)\b"),
        re.compile(r"\b(UnityEnd|UnityBegin|UnityConcludeTest|UnityDefaultTestRun)\s*\("),
        re.compile(
            r"\btesting\s*::\s*(UnitTest|TestEventListeners|TestEventListener|EmptyTestEventListener|internal)\b"
        ),
        re.compile(r"\bGTEST_FLAG\w*|\bGTEST_(OUTPUT|SKIP|FILTER)\b"),
        re.compile(r"\b(CU_basic_run_tests|CU_get_number_of_failures|srunner_ntests_failed|cmocka_run_group_tests)\b"),
    ],
}


def findings(path: str, added: list[str]) -> list[tuple[str, int, str]]:
    """(rule, line number among `added`, line) for each added line of a C/C++ file that a
    rule names: the audit's own walk over a patch calls this per file."""
    if not path.endswith(SUFFIXES):
        return []
    out = []
    for n, line in enumerate(added, 1):
        code = line.split("//", 1)[0]
        for rule, patterns in RULES.items():
            if any(p.search(code) for p in patterns):
                out.append((rule, n, line))
    return out
