"""Real JavaScript and TypeScript rows imported and validated end to end: SWE-bench
Multilingual style rows that name nothing of their environment, over repositories built
here (tests/helpers/js_repos.py) whose lock files npm resolves from the registry now, in the
node-20 environment image. The importer infers the language, the install (`npm ci` of that
lock file), the runner (jest from scripts.test; vitest from the row's log parser) and the
test files; validation (`--repeat 1`) builds each instance image and grades the empty patch
(FAIL) and the gold patch (PASS) with the lists in the benchmarks' spellings: jest's bare
titles and `describe › test`, vitest's `file > describe > test`.

- acme/stats: JavaScript, jest 29 with babel-jest and @babel/preset-env (the repository's
  babel.config.js and jest.config.js: ES module tests);
- acme/geo: TypeScript, vitest 3 with its vitest.config.ts."""

from __future__ import annotations

import pytest

from grader.images import Images
from grader.importers import import_rows
from grader.tasks.loader import TaskSet
from helpers import js_repos as js

pytestmark = [pytest.mark.docker, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def node_image(settings) -> str:
    """The node-20 environment image (npm and the proxy's CA bundle), built if missing."""
    return Images(settings).build_env("node-20")


def test_jest_and_vitest_rows_import_and_validate(settings, grader, node_image, tmp_path):
    clones = tmp_path / "clones"
    stats = js.make_stats(clones, lock_with=node_image)
    geo = js.make_geo(clones, lock_with=node_image)
    rows = [
        js.row(stats, "acme__stats-1", js.STATS_F2P, js.STATS_P2P),
        js.row(geo, "acme__geo-1", js.GEO_F2P, js.GEO_P2P, log_parser="vitest"),
    ]
    report = import_rows(
        "swebench", rows, settings=settings, repo_dir=clones, out=tmp_path / "js", grader=grader, repeat=1
    )
    by_id = {o.task_id: o for o in report.outcomes}
    for tid in ("acme__stats-1", "acme__geo-1"):
        o = by_id[tid]
        assert (o.status, o.empty, o.gold, o.problems) == ("kept", ["FAIL"], ["PASS"], []), report.as_dict()
    tasks = TaskSet(report.out)
    stats_task, geo_task = tasks.get("acme__stats-1"), tasks.get("acme__geo-1")
    assert (stats_task.check.runner, stats_task.metadata.language) == ("jest", "javascript")
    assert (geo_task.check.runner, geo_task.metadata.language) == ("vitest", "typescript")
    assert stats_task.install == geo_task.install == "npm ci --ignore-scripts --no-audit --no-fund"
    # the gold patch's grade names each listed id as the row lists it, resolved to the test it names
    result = grader.grade(stats_task, stats_task.gold_patch_text())
    assert result.tests.fail_to_pass == {"success": js.STATS_F2P, "failure": []}
    assert result.tests.all == {
        "test/median.test.js::median > of an odd-length list is its middle value": "passed",
        "test/median.test.js::median > of an even-length list averages the middle two": "passed",
    }
    assert result.tampered == [] and result.protections.report_channel == "signed"
