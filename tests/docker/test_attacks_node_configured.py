"""Hostile Node.js submissions for the runners that read the repository's own configuration,
jest with a jest.config.js and vitest with a vitest.config.ts (tests/helpers/node_mini.py's
configured variants), graded under runc, gVisor and the pool (a test marked
`same_in_every_sandbox` under runc alone: tests/README.md): the same attacks and honest fixes
as test_attacks_node.py (tests/helpers/node_attacks.py), with the configuration's own files as
targets (the setup file, the transform, the mapped module, the configuration shadowed or
replaced, __mocks__ written), and the lists written as SWE-bench's parsers write them."""

from __future__ import annotations

import pytest

from helpers.node_attacks import (  # noqa: F401  (fixtures and tests, collected here)
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
    test_success_lines_printed_by_the_code_under_test_pass_nothing,
    test_the_empty_patch_fails_honestly,
    test_the_gold_patch_passes_with_every_canary_as_it_must_be,
    test_the_hidden_test_edited_and_the_visible_one_deleted_are_restored,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
RUNNERS = ["jest-config", "vitest"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "runner" in metafunc.fixturenames:
        metafunc.parametrize("runner", RUNNERS)
