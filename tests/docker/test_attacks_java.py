"""Hostile Java submissions, graded through the real grader (tests/helpers/java_mini.py's
project in the java-21 environment) under runc, gVisor and the pool (a test marked
`same_in_every_sandbox` under runc alone: tests/README.md): each gets the verdict it deserves,
and an honest submission of each shape still PASSes.

What the junit runner stands on (grader/box/runners/junit.py, docs/runners/junit.md):
outcomes only from the signed records of the grader's JUnit listener, loaded from a
root-owned jar; the report descriptors in system properties only; src/test/ back to the
base and root's for the run; pom.xml, JUnit's configuration and service registrations,
jars and class files restored; the dependencies and JUnit ahead of the library on every
class path; the compiled classes root's before any test runs; canaries in the hidden
test's package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import helpers.java_mini as jm
from grader.pipeline import Grader
from grader.tasks.loader import TaskSet
from grader.verdict import Result, Verdict
from helpers.sandboxes import grader_under

pytestmark = [pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]
CALC = "src/main/java/calc/Calc.java"


@pytest.fixture(scope="module")
def java_mini(tmp_path_factory) -> jm.JavaMini:
    return jm.JavaMini(tmp_path_factory.mktemp("java-mini"))


@pytest.fixture(scope="module")
def java_tasks(tmp_path_factory, java_mini) -> TaskSet:
    tasks = tmp_path_factory.mktemp("java-tasks")
    jm.write_tasks(tasks, java_mini)
    return TaskSet(tasks)


@pytest.fixture(scope="module")
def grader(sandbox: str, tmp_path_factory, java_tasks) -> Grader:
    return grader_under(sandbox, java_tasks.dir, tmp_path_factory.mktemp("java-cache"))


def grade(grader: Grader, java_tasks: TaskSet, patch: bytes, task: str = "java-mini") -> Result:
    result = grader.grade(java_tasks.get(task), patch)
    assert result.verdict is not Verdict.ERROR, result.to_json()
    assert result.provenance.runtime == grader.runtime
    return result


def why(result: Result) -> str:
    return f"{result.verdict}: {result.explanation} | tampered {result.tampered} | {result.output[-2500:]}"


def calc(java_mini: jm.JavaMini, more: str, *, fixed: bool = False, **files: str | None) -> bytes:
    return java_mini.diff({CALC: jm.calc_with(more, guard=fixed), **files})


# --- the gold patch, the empty one, the forms of the ids --------------------------------------


def test_gold_passes_and_empty_fails(grader, java_tasks):
    task = java_tasks.get("java-mini")
    gold = grade(grader, java_tasks, task.gold_patch_text())
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.protections.report_channel == "signed"
    assert gold.protections.canaries is not None and gold.protections.canaries.wrong == 0
    assert set(gold.tests.all) == set(jm.F2P + jm.P2P)  # the canaries are not among them
    assert "2 recompiled against the base's classes" in gold.output, gold.output  # Calc, and Stats names it
    empty = grade(grader, java_tasks, b"")
    assert empty.verdict is Verdict.FAIL and not empty.tampered, why(empty)
    assert empty.tests.all["calc.MeanTest.emptyThrows"] == "failed"
    assert empty.tests.all["calc.MeanTest.meanOfSame[2]"] == "passed"
    assert "unchanged since the base" in empty.output
    # the output names the task's failure, and no canary
    assert "emptyThrows()" in empty.output
    assert empty.output.count("✘") == 1, empty.output


def test_ids_by_hash_and_whole_class_without_a_prebuilt_base(grader, java_tasks):
    task = java_tasks.get("java-mini-plain")
    gold = grade(grader, java_tasks, task.gold_patch_text(), "java-mini-plain")
    assert gold.verdict is Verdict.PASS, why(gold)
    assert gold.tests.all["calc.MeanTest#emptyThrows"] == "passed"
    assert gold.tests.all["calc.CalcTest"] == "passed"
    assert "no prebuilt base" in gold.output
    empty = grade(grader, java_tasks, b"", "java-mini-plain")
    assert empty.verdict is Verdict.FAIL and not empty.tampered, why(empty)
    assert empty.tests.all["calc.MeanTest#emptyThrows"] == "failed"


# --- 1. outcomes never from output or an unsigned line -------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_forged_success_lines_printed_by_the_code_under_test_fail(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.FORGED_PRINT))
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert "Tests run: 6, Failures: 0" in result.output  # printed, and believed by nothing
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"


def test_the_report_channel_is_out_of_reach(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.FORGED_RECORD))
    assert result.verdict is Verdict.FAIL, why(result)
    # no write reaches the report pipe; one that did would carry no signature: forgery
    wrote = [line for line in result.output.splitlines() if line.startswith("wrote to fd") and "pipe:" in line]
    assert not wrote or result.tampered, why(result)
    assert "FileDescriptor.fd: InaccessibleObjectException" in result.output
    assert "already open" in result.output
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"


# --- 2. the runner's configuration and what JUnit loads by itself ----------------------------------


@pytest.mark.same_in_every_sandbox
def test_junit_configuration_and_services_from_the_patch_are_removed(grader, java_tasks, java_mini):
    pom = jm.POM.replace("</properties>", "  <skipTests>true</skipTests>\n  </properties>")
    result = grade(grader, java_tasks, calc(java_mini, "", **jm.CONFIG_FILES, **{"pom.xml": pom}))
    assert result.verdict is Verdict.FAIL, why(result)
    neutralized = set(result.apply.neutralized)
    assert {
        "pom.xml",
        "src/main/resources/junit-platform.properties",
        "src/main/resources/META-INF/services/org.junit.jupiter.api.extension.Extension",
        "src/test/resources/junit-platform.properties",
        "src/test/resources/META-INF/services/org.junit.jupiter.api.extension.Extension",
        "src/test/resources/META-INF/services/java.nio.file.spi.FileSystemProvider",
    } <= neutralized, neutralized
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_a_class_named_like_junits_own_changes_nothing(grader, java_tasks, java_mini):
    patch = calc(java_mini, "", **{"src/main/java/org/junit/jupiter/api/Assertions.java": jm.FAKE_ASSERTIONS})
    result = grade(grader, java_tasks, patch)
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_jars_and_class_files_a_patch_brings_are_removed(grader, java_tasks, java_mini):
    files = {"lib/evil.jar": b"PK\x05\x06" + bytes(18), "src/main/resources/calc/Calc.class": b"\xca\xfe\xba\xbe"}
    result = grade(grader, java_tasks, calc(java_mini, "", **files))
    assert result.verdict is Verdict.FAIL, why(result)
    assert {"lib/evil.jar", "src/main/resources/calc/Calc.class"} <= set(result.apply.neutralized)


# --- 3. the tests themselves ---------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_an_edited_hidden_test_a_deleted_own_test_and_a_new_test_helper_go_back(grader, java_tasks, java_mini):
    hollow = jm.HIDDEN_TEST.replace("assertThrows(IllegalArgumentException.class, () -> Calc.mean());", "")
    files = {
        jm.HIDDEN_PATH: hollow,
        "src/test/java/calc/CalcTest.java": None,
        "src/test/java/calc/Helper.java": "package calc;\n\nclass Helper {}\n",
        "src/test/resources/calc/data.txt": "0 0 9\n",
    }
    result = grade(grader, java_tasks, calc(java_mini, "", **files))
    assert result.verdict is Verdict.FAIL, why(result)
    assert {
        "src/test/java/calc/CalcTest.java",
        "src/test/java/calc/Helper.java",
        "src/test/resources/calc/data.txt",
    } <= set(result.apply.neutralized)
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"
    assert result.tests.all["calc.CalcTest.meanOfOne"] == "passed"
    assert result.tests.all["calc.MeanTest.readsData"] == "passed"


def test_what_the_tests_are_made_of_cannot_be_rewritten_while_they_run(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.REWRITE_AT_RUN))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "rewrote" not in result.output, result.output
    assert "AccessDeniedException" in result.output
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "failed"


# --- 4. crashes never pass; a hang times out ----------------------------------------------------


def test_exit_0_inside_a_test_does_not_pass(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.EXIT0, fixed=True))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "ended before JUnit finished its report" in result.explanation, why(result)


def test_halt_0_after_the_report_is_tampering(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.HALT_AFTER))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tampered and "exited with 0" in result.tampered[0], why(result)


@pytest.mark.same_in_every_sandbox
def test_a_class_that_cannot_initialize_fails_its_tests(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.INIT_THROWS, fixed=True))
    assert result.verdict is Verdict.FAIL and not result.tampered, why(result)
    assert result.tests.all["calc.MeanTest.meanOfTwo"] == "failed"


@pytest.mark.same_in_every_sandbox
def test_main_sources_that_do_not_compile_fail_every_test(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, java_mini.diff({CALC: jm.MAIN_DOES_NOT_COMPILE}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert "do not compile" in result.explanation
    assert not result.tests.all
    assert "Calc.java" in result.output  # javac's message is shown


@pytest.mark.same_in_every_sandbox
def test_test_classes_that_do_not_compile_are_collect_errors(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, java_mini.diff({CALC: jm.RENAMED_API}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert set(result.check["collect_errors"]) == {jm.HIDDEN_PATH, "src/test/java/calc/CalcTest.java"}
    assert not result.tests.all


def test_a_hang_times_out(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, calc(java_mini, jm.HANG, fixed=True), "java-mini-hang")
    assert result.verdict is Verdict.TIMED_OUT, why(result)


# --- 5. a blanket flip ----------------------------------------------------------------------------


@pytest.mark.same_in_every_sandbox
def test_a_blanket_flip_is_caught_by_the_canaries(grader, java_tasks, java_mini):
    result = grade(grader, java_tasks, java_mini.diff({CALC: jm.BLANKET_FLIP_CALC}))
    assert result.verdict is Verdict.FAIL, why(result)
    assert result.tests.all["calc.MeanTest.emptyThrows"] == "passed"  # flipped
    # the canaries that must fail (they run last) passed; and the listener, which counts failures
    # by the constant itself, ended with 1 where the launcher, fooled too, exited 0
    assert any("canary test that must fail was reported as passed" in t for t in result.tampered), why(result)


# --- honest submissions of each shape still pass ---------------------------------------------------


def test_honest_prints_threads_and_a_new_class_pass(grader, java_tasks, java_mini):
    calc_java = jm.CALC % {
        "guard": "        Checks.notEmpty(xs);\n",
        "more": jm.indent(jm.HONEST_PRINT + jm.HONEST_THREAD),
    }
    patch = java_mini.diff({CALC: calc_java, "src/main/java/calc/Checks.java": jm.HONEST_NEW_CLASS})
    result = grade(grader, java_tasks, patch)
    assert result.verdict is Verdict.PASS, why(result)
    assert "calc ready" in result.output


def test_an_honest_fix_that_deletes_a_class_and_adds_a_resource_passes(grader, java_tasks, java_mini):
    patch = java_mini.diff(
        {
            CALC: jm.FIXED_CALC,
            "src/main/java/calc/Stats.java": None,
            "src/main/resources/calc/README.txt": "what calc does\n",
        }
    )
    result = grade(grader, java_tasks, patch)
    assert result.verdict is Verdict.PASS, why(result)
    assert "1 deleted" in result.output
