"""The static audit's rules for Java: where a patch's Java code reaches into the JUnit run
(the launcher, Jupiter, the grader's listener and its report channel) or around it.

What code under test can do in the test JVM (docs/runners/junit.md says what the junit
runner closes and what it leaves): end the JVM before or after the report (System.exit,
Runtime.halt, a shutdown hook); reach JUnit's own classes, which sit in the unnamed module
and are open to reflection (setAccessible, MethodHandles.privateLookupIn, sun.misc.Unsafe:
a blanket flip rewrites TestExecutionResult.Status.FAILED's ordinal); call the launcher's
API or a TestExecutionListener from library code; wrap a descriptor number in a
java.io.FileDescriptor or open /proc/self/fd/N to reach the report pipe; dump its own heap
for the key (HotSpotDiagnosticMXBean.dumpHeap); load an agent or native code (System.load,
Instrumentation, ByteBuddyAgent, the attach API); print from a static initializer before the
tests start. None of it is needed by a library, and each is one line to read.

    SUFFIXES          the file endings these rules read (Java sources)
    RULES             rule -> patterns over one added line of a main source
    PATH_RULES        rule -> a pattern over a path the patch writes
    rules_for(path)   the line rules that apply to a path

A heuristic, as the Python rules are (grader/audit.py): it makes the usual tricks visible;
the signed report, the canaries, the protected paths and the sealed class path are the
other layers.
"""

from __future__ import annotations

import re

SUFFIXES: tuple[str, ...] = (".java",)

# what a library has no business naming: JUnit's engine, launcher and console packages, the
# listener's and the report channel's (the public Jupiter API is what tests use, not libraries)
_RUNNER_PACKAGES = (
    r"org\.junit\.platform\.(launcher|engine|console|commons\.util|reporting)"
    r"|org\.junit\.jupiter\.engine|org\.junit\.vintage|org\.opentest4j|grader\.report|grader\.junit"
)

RULES: dict[str, list[re.Pattern[str]]] = {
    "process-exit": [
        re.compile(r"\bSystem\s*\.\s*exit\s*\("),
        re.compile(r"\bRuntime\s*\.\s*getRuntime\s*\(\s*\)\s*\.\s*(exit|halt|addShutdownHook)\s*\("),
        re.compile(r"\.\s*halt\s*\(\s*-?\d+\s*\)"),
        re.compile(r"\bProcessHandle\s*\.\s*current\s*\(\s*\)\s*\.\s*destroy"),
    ],
    "runner-internals": [
        re.compile(rf"\b({_RUNNER_PACKAGES})\b"),
        re.compile(
            r"\b(TestExecutionListener|LauncherSessionListener|LauncherDiscoveryListener|PostDiscoveryFilter)\b"
        ),
        re.compile(r"\b(TestExecutionResult|TestIdentifier|TestPlan|LauncherFactory|EngineExecutionListener)\b"),
        re.compile(r"\b(TestExecutionExceptionHandler|InvocationInterceptor|TestWatcher|ExtensionContext)\b"),
        re.compile(r"\bGRADER_(REPORT|KEY)_FD\b|\bgrader\.(report|key)\.fd\b|\bgrader\.collect\.errors\b"),
        re.compile(r"\bjunit\.(jupiter|platform)\.[a-z]+[\w.]*\b"),  # a JUnit configuration key set from code
    ],
    "deep-reflection": [
        re.compile(r"\.\s*setAccessible\s*\(\s*true\s*\)|\btrySetAccessible\s*\("),
        re.compile(r"\bMethodHandles\s*\.\s*privateLookupIn\s*\("),
        re.compile(r"\bsun\s*\.\s*misc\s*\.\s*Unsafe\b|\bjdk\s*\.\s*internal\s*\.\s*misc\b|\btheUnsafe\b"),
        re.compile(r"\bgetDeclaredField\s*\(\s*\"(ordinal|name|fd|handle|key|channel|modifiers)\"\s*\)"),
        re.compile(r"\bVarHandle\b.*\bfindStaticVarHandle\b|\bModule\s*\.\s*addOpens\b|\.\s*implAddOpens\b"),
    ],
    "descriptors": [
        re.compile(r"/proc/"),
        re.compile(r"/dev/fd\b"),
        re.compile(r"\bnew\s+FileDescriptor\s*\(|\bFileDescriptor\s*\.\s*class\b"),
        re.compile(r"\bFileDescriptor\s*\.\s*(in|out|err)\b"),
    ],
    "agents-native": [
        re.compile(r"\bSystem\s*\.\s*(load|loadLibrary)\s*\(|\bRuntime\s*\.\s*getRuntime\s*\(\s*\)\s*\.\s*load"),
        re.compile(r"\bjava\s*\.\s*lang\s*\.\s*instrument\b|\bInstrumentation\b|\bagentmain\b|\bpremain\b"),
        re.compile(r"\bByteBuddyAgent\b|\bcom\s*\.\s*sun\s*\.\s*tools\s*\.\s*attach\b|\bVirtualMachine\s*\.\s*attach"),
        re.compile(r"\bHotSpotDiagnosticMXBean\b|\bdumpHeap\s*\(|\bjdk\s*\.\s*jfr\b|\bManagementFactory\b"),
        re.compile(r"\bjava\s*\.\s*lang\s*\.\s*foreign\b|\bLinker\s*\.\s*nativeLinker\b"),
    ],
    # a test source path, or the grader's class path, in library code: the hidden tests or their
    # compiled classes rewritten at run time
    "test-files": [
        re.compile(r"\"[^\"]*\bsrc/test/[^\"]*\""),
        re.compile(r"\"[^\"]*(\.grader-|/opt/java-build|/usr/share/grader-java)[^\"]*\""),
        re.compile(r"\bgetProtectionDomain\s*\(\s*\)\s*\.\s*getCodeSource\b"),
    ],
    # what a run prints that looks like the runner's own lines (the launcher's summary, its tree's
    # marks, Surefire's counts, a report record): never read for outcomes, a forgery attempt all the same
    "forged-output": [
        re.compile(
            r"\bSystem\s*\.\s*(out|err)\s*\.\s*(print|println|printf|format|write)\s*\(.*"
            r"(tests? (successful|failed|found|aborted|skipped)|containers? (found|successful|failed)|Tests run:"
            r"|\[\s*\d+\s+(tests?|containers?)\b|\u2714|\u2718|\\u2714|\\u2718|\\?\"t\\?\"\s*:)",
            re.I,
        ),
    ],
    # a static initializer (run when the tests first touch the class) that prints or reaches the launcher,
    # written on one line (the line rules see one line at a time)
    "static-init": [
        re.compile(r"^\s*static\s*\{.*\b(System\s*\.\s*(out|err|set(Out|Err)|exit)|ConsoleLauncher|LauncherFactory)\b"),
    ],
    "stream-swap": [
        re.compile(r"\bSystem\s*\.\s*set(Out|Err|In)\s*\("),
        re.compile(r"\bThread\s*\.\s*setDefaultUncaughtExceptionHandler\s*\("),
        re.compile(r"\bsetContextClassLoader\s*\("),
    ],
}

# a main source in a package of JUnit's (or the grader's, or an assertion library's): a class
# named like theirs, meant to shadow it on a class path
SHADOWED_PACKAGES = re.compile(
    r"^\s*package\s+(org\.junit|org\.opentest4j|org\.apiguardian|grader|org\.assertj|org\.hamcrest"
    r"|org\.mockito|net\.bytebuddy)\b"
)

PATH_RULES: dict[str, re.Pattern[str]] = {
    # what the build and JUnit read by themselves: restored to the base whatever the patch does
    "runner-files": re.compile(
        r"(^|/)(pom\.xml|build\.gradle(\.kts)?|settings\.gradle(\.kts)?|gradle\.properties|build\.xml"
        r"|junit-platform\.properties|module-info\.java)$|(^|/)\.mvn/|(^|/)src/test/|(^|/)META-INF/services/"
    ),
    "compiled-code": re.compile(r"\.(jar|class|so|dylib|jnilib|dll|jmod|war)$"),
}


def rules_for(path: str) -> dict[str, list[re.Pattern[str]]]:
    """The line rules for a file the patch writes (none for a file these rules do not read;
    a test source under src/test/ is the task's, restored to the base: its lines are not read)."""
    if not path.endswith(SUFFIXES) or "src/test/" in path:
        return {}
    return {**RULES, "shadowing": [SHADOWED_PACKAGES]}
