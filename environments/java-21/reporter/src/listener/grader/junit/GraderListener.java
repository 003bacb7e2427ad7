package grader.junit;

import grader.report.Channel;
import java.io.File;
import java.io.IOException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.TestSource;
import org.junit.platform.engine.UniqueId;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * The grader's JUnit Platform listener: one signed record per test on the report channel
 * (CONTRACT.md), found by the launcher through ServiceLoader in a root-owned jar on its class
 * path. Test ids are {@code fully.qualified.Class.method}; a parameterized, repeated or
 * dynamic test's invocations are {@code method[1]}, {@code method[2]} (nested dynamic
 * containers {@code method[1][2]}); a nested class is {@code Outer$Inner.method}. Two static
 * tests that would share an id (overloaded methods) get their parameter types:
 * {@code method(java.lang.String)}.
 *
 * <p>Outcomes: successful = passed, failed = failed, aborted (an assumption) and disabled =
 * skipped; a test that never ran because its class (or engine) failed = failed. The
 * {@code end} record carries the exit status the console launcher returns (1 when any test or
 * container failed, else 0), written when the plan finishes: a JVM stopped by
 * {@code System.exit} / {@code Runtime.halt} before then leaves no end.
 */
public final class GraderListener implements TestExecutionListener {
    private final Channel channel;
    private final String testRoot = System.getProperty("grader.test.root", "src/test/java");
    private final Map<String, Long> started = new HashMap<>();
    private final Set<String> reported = new HashSet<>(); // unique ids with a record
    private final Set<String> written = new HashSet<>(); // test ids with a record
    private final Set<String> collectErrors = new HashSet<>();
    private final Set<String> ambiguous = new HashSet<>();
    private TestPlan plan;
    private int collected;
    private int testsFailed;
    private int containersFailed;
    private boolean finished;

    public GraderListener() {
        Channel c = null;
        if (Channel.configured()) {
            try {
                c = Channel.open();
            } catch (IOException | RuntimeException e) {
                System.err.println("grader: the report channel cannot be opened: " + e);
            }
        }
        channel = c;
        if (channel == null) {
            return;
        }
        emit(record("start", "pid", ProcessHandle.current().pid()));
        // test files junit-run could not compile (it runs before any code of the repository)
        String errors = System.getProperty("grader.collect.errors", "");
        for (String path : errors.split(File.pathSeparator)) {
            if (!path.isEmpty()) {
                collectError(path);
            }
        }
    }

    @Override
    public void testPlanExecutionStarted(TestPlan testPlan) {
        if (!fromLauncher("testPlanExecutionStarted")) {
            return;
        }
        plan = testPlan;
        Map<String, Integer> seen = new HashMap<>();
        for (TestIdentifier root : testPlan.getRoots()) {
            for (TestIdentifier t : testPlan.getDescendants(root)) {
                if (t.isTest()) {
                    collected++;
                    seen.merge(testId(t, false), 1, Integer::sum);
                }
            }
        }
        seen.forEach((id, n) -> {
            if (n > 1) {
                ambiguous.add(id);
            }
        });
    }

    @Override
    public void dynamicTestRegistered(TestIdentifier t) {
        if (fromLauncher("dynamicTestRegistered") && t.isTest()) {
            collected++;
        }
    }

    @Override
    public void executionStarted(TestIdentifier t) {
        if (fromLauncher("executionStarted")) {
            started.put(t.getUniqueId(), System.nanoTime());
        }
    }

    @Override
    public void executionSkipped(TestIdentifier t, String reason) {
        if (!fromLauncher("executionSkipped")) {
            return;
        }
        if (t.isTest()) {
            test(t, "skipped");
        }
        below(t, "skipped");
    }

    @Override
    public void executionFinished(TestIdentifier t, TestExecutionResult result) {
        if (!fromLauncher("executionFinished")) {
            return;
        }
        TestExecutionResult.Status status = result.getStatus();
        if (t.isTest()) {
            if (status == TestExecutionResult.Status.FAILED) {
                testsFailed++;
            }
            test(t, switch (status) {
                case SUCCESSFUL -> "passed";
                case FAILED -> "failed";
                case ABORTED -> "skipped";
            });
        } else if (status == TestExecutionResult.Status.FAILED) {
            containersFailed++;
        }
        if (t.isContainer()) {
            if (status == TestExecutionResult.Status.FAILED) {
                Optional<TestSource> src = t.getSource();
                Throwable cause = result.getThrowable().orElse(null);
                if (src.isPresent() && src.get() instanceof ClassSource cs && cause instanceof LinkageError) {
                    // the class did not load (static initializer, missing class): its file failed to load
                    String outer = cs.getClassName().split("\\$", 2)[0];
                    collectError(testRoot + "/" + outer.replace('.', '/') + ".java");
                }
            }
            // tests under a container that failed or was aborted never ran: not passed
            below(t, status == TestExecutionResult.Status.ABORTED ? "skipped" : "failed");
        }
    }

    @Override
    public void testPlanExecutionFinished(TestPlan testPlan) {
        if (!fromLauncher("testPlanExecutionFinished") || finished) {
            return;
        }
        finished = true;
        Map<String, Object> end = record("end", "exit", testsFailed + containersFailed > 0 ? 1 : 0);
        end.put("collected", collected);
        emit(end);
    }

    // --- records ---------------------------------------------------------------------

    private void test(TestIdentifier t, String outcome) {
        if (!reported.add(t.getUniqueId())) {
            return;
        }
        String id = testId(t, false);
        if (ambiguous.contains(id)) {
            id = testId(t, true);
        }
        if (!written.add(id)) {
            emit(record("integrity", "what", "two tests of this run have the id " + id));
            return;
        }
        Long t0 = started.get(t.getUniqueId());
        Map<String, Object> r = record("test", "id", id);
        r.put("when", "call");
        r.put("outcome", outcome);
        r.put("d", Channel.seconds(t0 == null ? 0 : System.nanoTime() - t0));
        emit(r);
    }

    /** Tests under a container that ended without running them. */
    private void below(TestIdentifier container, String outcome) {
        if (plan == null) {
            return;
        }
        for (TestIdentifier d : plan.getDescendants(container)) {
            if (d.isTest() && !reported.contains(d.getUniqueId())) {
                test(d, outcome);
            }
        }
    }

    private void collectError(String path) {
        if (collectErrors.add(path)) {
            Map<String, Object> r = record("collect", "id", path);
            r.put("outcome", "error");
            emit(r);
        }
    }

    private static Map<String, Object> record(String kind, String key, Object value) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("t", kind);
        r.put(key, value);
        return r;
    }

    private void emit(Map<String, Object> record) {
        if (channel == null) {
            return;
        }
        try {
            channel.emit(record);
        } catch (IOException e) {
            System.err.println("grader: the report channel failed: " + e);
        }
    }

    /**
     * Only the launcher notifies listeners: a call from anywhere else (test code that found
     * this object) is reported and ignored.
     */
    private boolean fromLauncher(String what) {
        Class<?> caller = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE)
                .walk(s -> s.map(StackWalker.StackFrame::getDeclaringClass)
                        .filter(c -> c != GraderListener.class)
                        .findFirst()
                        .orElse(null));
        boolean ok = caller != null
                && caller.getName().startsWith("org.junit.platform.launcher.")
                && caller.getClassLoader() == TestExecutionListener.class.getClassLoader();
        if (!ok) {
            emit(record("integrity", "what", what + " called from " + (caller == null ? "?" : caller.getName())));
        }
        return ok;
    }

    // --- ids ---------------------------------------------------------------------------

    static String testId(TestIdentifier t, boolean withParameters) {
        List<UniqueId.Segment> segments = t.getUniqueIdObject().getSegments();
        String cls = null;
        String method = null;
        StringBuilder suffix = new StringBuilder();
        for (UniqueId.Segment s : segments) {
            switch (s.getType()) {
                case "class" -> cls = s.getValue();
                case "nested-class" -> cls = (cls == null ? "" : cls + "$") + s.getValue();
                case "method", "test-template", "test-factory" -> {
                    String v = s.getValue();
                    method = withParameters || v.indexOf('(') < 0 ? v : v.substring(0, v.indexOf('('));
                    suffix.setLength(0);
                }
                case "test-template-invocation", "dynamic-test", "dynamic-container" ->
                        suffix.append('[').append(s.getValue().replace("#", "")).append(']');
                default -> { }
            }
        }
        if (cls != null && method != null) {
            return cls + "." + method + suffix;
        }
        // other engines (vintage): the method source
        Optional<TestSource> src = t.getSource();
        if (src.isPresent() && src.get() instanceof MethodSource m) {
            String params = withParameters ? "(" + m.getMethodParameterTypes() + ")" : "";
            return m.getClassName() + "." + m.getMethodName() + params + suffix;
        }
        return t.getUniqueId();
    }
}
