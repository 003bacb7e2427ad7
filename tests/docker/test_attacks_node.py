"""Hostile Node.js submissions, graded through the real grader under runc, gVisor and the pool
(a test marked `same_in_every_sandbox` under runc alone: tests/README.md), each with the
verdict it deserves, for tap, node-test, mocha and plain jest (jest with the repository's own
configuration and vitest: test_attacks_node_configured.py, the same tests from
tests/helpers/node_attacks.py) on the tiny `calc` repository of tests/helpers/node_mini.py:
success lines printed by the code under test, a runner plugin or configuration brought by the
patch (for the configured variants: the setup file, the transform, the mapped module and the
configuration edited, shadowed or replaced, __mocks__ written), the hidden test edited and the
visible one deleted, a crash, a hang, a blanket flip of every test and a flip of the throws
assertion alone that only the canaries catch, a forged record written into the report pipe, a
rewrite of the next test file's process; and honest submissions of each shape, which still
PASS. Last, the guard of what node loads by itself (grader/box/runners/node_guard.py): a
package made for the next file and taken away again, installed packages rewritten, touched,
moved or added to and package.json moved away and back, and an honest writer of a tool's
cache under node_modules/.cache. The configured variants list their ids as SWE-bench's parsers write them (`mean › empty
throws`, `vt/mean.test.ts > mean > empty throws`), resolved by the grader. The attacks' code is
in tests/helpers/node_payloads.py (tests/unit/test_audit_node.py checks the audit names it)."""

from __future__ import annotations

import pytest

from grader.verdict import Verdict
from helpers import node_payloads as pl
from helpers.node_attacks import (  # noqa: F401  (fixtures and tests, collected here)
    failed,
    grade,
    node_grader,
    node_mini,
    node_set,
    test_a_blanket_flip_of_every_test_is_caught_by_the_canaries,
    test_a_flip_made_only_inside_the_hidden_test_file_is_caught_by_the_canaries,
    test_a_flip_of_the_throws_assertion_alone_is_caught_by_the_canaries,
    test_a_hang_times_out,
    test_a_process_that_ends_in_the_middle_of_the_tests_does_not_pass,
    test_a_record_written_into_the_report_pipe_is_forgery,
    test_a_runner_plugin_or_configuration_brought_by_the_patch_is_taken_back,
    test_an_honest_fix_of_another_shape_passes,
    test_one_test_files_process_cannot_rewrite_the_next_ones,
    test_success_lines_printed_by_the_code_under_test_pass_nothing,
    test_the_empty_patch_fails_honestly,
    test_the_gold_patch_passes_with_every_canary_as_it_must_be,
    test_the_hidden_test_edited_and_the_visible_one_deleted_are_restored,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
RUNNERS = ["tap", "node-test", "mocha", "jest"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "runner" in metafunc.fixturenames:
        metafunc.parametrize("runner", RUNNERS)


# --- what node loads by itself (grader/box/runners/node_guard.py) -----------------------------


def test_a_package_made_for_the_next_file_and_taken_away_again_is_seen(node_grader, node_set, node_mini):  # noqa: F811
    """tape is Debian's here: the first test file's process makes a node_modules/ with a tape
    that passes everything, the next file's process loads it and takes it away. Nothing is
    left when the tests end; the guard's look after each unit sees it."""
    result = grade(node_grader, node_set, node_mini, "tap", {"calc.js": pl.PACKAGES_FOR_THE_NEXT_FILE})
    failed(result, "tap")
    assert any("node_modules" in t for t in result.tampered), result.tampered


def test_installed_packages_cannot_be_changed_and_a_configuration_moved_back_is_seen(node_grader, node_set, node_mini):  # noqa: F811
    """jest's packages are root's and read-only: a test process can neither rewrite, touch,
    move nor add to them. package.json, in the user's directory, can be moved away and back
    (bytes and times kept): its held identity's change time moved on."""
    result = grade(node_grader, node_set, node_mini, "jest", {"calc.js": pl.REWRITE_PACKAGES})
    failed(result, "jest")
    for how in ("rewrite an installed file", "set its times back", "move a package aside", "add a package"):
        assert f"GUARD {how}: refused" in result.output, result.output
    assert "GUARD replace package.json: done" in result.output, result.output
    assert any("package.json" in t for t in result.tampered), result.tampered
    if "GUARD move node_modules aside: done" in result.output:  # overlayfs refuses it (EXDEV)
        assert any("node_modules" in t for t in result.tampered), result.tampered


def test_a_tools_cache_written_under_node_modules_is_honest(node_grader, node_set, node_mini):  # noqa: F811
    """node_modules/.cache is the user's (find-cache-dir, babel-loader): the fix that writes
    there passes, untainted."""
    result = grade(node_grader, node_set, node_mini, "jest", {"calc.js": pl.CACHE_WRITER})
    assert result.verdict is Verdict.PASS and not result.tampered, result.to_json()
