"""A tiny Node.js repository and four tasks over it, one per Node.js runner (tap, node-test,
mocha, jest), for the Node.js attacks (test_attacks_node.py).

The repository is `calc`: calc.js's mean() returns NaN for an empty list where it must
throw. Every task places the same hidden tests (one file per runner's style) and runs only
its own runner's files. mocha and jest come from the npm registry when the image is built
(the install step); tape is Debian's (/usr/share/nodejs, node's global path in the node-20
image), node:test is node's own: those two tasks install nothing.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import textwrap
from pathlib import Path

from helpers.node_payloads import BUGGY, FIXED

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
}

BASE_FILES = {
    "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js"\n}\n',
    "calc.js": BUGGY,
    "test/basic.js": textwrap.dedent("""\
        'use strict';
        const test = require('tape');
        const { mean } = require('../calc');

        test('one', (t) => {
          t.equal(mean([2]), 2);
          t.end();
        });
        """),
    "README.md": "calc\n",
}
# the hidden tests: one file per runner's style, the same two tests in each
HIDDEN = {
    "test/mean.js": textwrap.dedent("""\
        'use strict';
        const test = require('tape');
        const { mean } = require('../calc');

        test('empty throws', (t) => {
          t.throws(() => mean([]), /empty/);
          t.end();
        });

        test('two', (t) => {
          t.equal(mean([1, 3]), 2);
          t.end();
        });
        """),
    "test/mean.test.js": textwrap.dedent("""\
        'use strict';
        const test = require('node:test');
        const assert = require('node:assert');
        const { mean } = require('../calc');

        test('empty throws', () => {
          assert.throws(() => mean([]), /empty/);
        });

        test('two', () => {
          assert.strictEqual(mean([1, 3]), 2);
        });
        """),
    "test/mean.spec.js": textwrap.dedent("""\
        'use strict';
        const assert = require('node:assert');
        const { mean } = require('../calc');

        describe('mean', function () {
          it('empty throws', function () {
            assert.throws(() => mean([]), /empty/);
          });

          it('two', function () {
            assert.strictEqual(mean([1, 3]), 2);
          });
        });
        """),
    "__tests__/mean.test.js": textwrap.dedent("""\
        'use strict';
        const { mean } = require('../calc');

        describe('mean', () => {
          test('empty throws', () => {
            expect(() => mean([])).toThrow(/empty/);
          });

          test('two', () => {
            expect(mean([1, 3])).toBe(2);
          });
        });
        """),
}
NPM = "npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock"
# runner -> its install step (tape is Debian's, node:test is node's own)
INSTALL = {"tap": "", "node-test": "", "mocha": f"{NPM} mocha@10.8.2", "jest": f"{NPM} jest@29.7.0"}
# runner -> (test files it runs, FAIL_TO_PASS, PASS_TO_PASS)
RUNS = {
    "tap": (
        ["test/mean.js", "test/basic.js"],
        ["test/mean.js::empty throws"],
        ["test/mean.js::two", "test/basic.js::one"],
    ),
    "node-test": (["test/mean.test.js"], ["test/mean.test.js::empty throws"], ["test/mean.test.js::two"]),
    "mocha": (["test/mean.spec.js"], ["test/mean.spec.js::mean > empty throws"], ["test/mean.spec.js::mean > two"]),
    "jest": (
        ["__tests__/mean.test.js"],
        ["__tests__/mean.test.js::mean > empty throws"],
        ["__tests__/mean.test.js::mean > two"],
    ),
}
TASK_YAML = """\
id: {id}
instruction: Make calc's mean() throw a RangeError('empty') for an empty list.
metadata: {{suite: node-mini, language: javascript, difficulty: easy, created_at: 2024-01-01}}
repo: {{bundle: ../node-mini.bundle, commit: {commit}}}
environment: node-20
{install}check:
  type: tests
  runner: {runner}
  paths: {paths}
  hidden_tests: {hidden}
  fail_to_pass: {f2p}
  pass_to_pass: {p2p}
limits: {{timeout: {timeout}, memory: 1g, pids: 256}}
gold_patch: gold.patch
"""


def task_id(runner: str) -> str:
    return "node-" + runner


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=GIT_ENV,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _write(root: Path, files: dict[str, str | bytes | None]) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is None:
            if path.exists():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


class NodeMini:
    """The repository, and a way to turn file edits into a real git diff."""

    def __init__(self, root: Path):
        self.src = root / "src"
        self.src.mkdir(parents=True)
        git("init", "-q", ".", cwd=self.src)
        _write(self.src, BASE_FILES)
        git("add", "-A", cwd=self.src)
        git("commit", "-qm", "base", cwd=self.src)
        self.base = git("rev-parse", "HEAD", cwd=self.src).strip()

    def diff(self, files: dict[str, str | bytes | None]) -> bytes:
        _write(self.src, files)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)


def _flow(items: list[str]) -> str:
    import json

    return json.dumps(items)


HANG_TIMEOUT = 10  # the hang tasks' limit: a hang costs a test this long; an honest run takes 1-4 s


def write_tasks(tasks: Path, mini: NodeMini, *, timeout: int = 30) -> None:
    """Two tasks per runner under `tasks` (and the shared bundle): node-RUNNER, and
    node-RUNNER-hang, the same with a short time limit, for the hangs. Their instance
    images share every layer."""
    git("bundle", "create", "-q", str(tasks / "node-mini.bundle"), "--all", cwd=mini.src)
    gold = mini.diff({"calc.js": FIXED})
    hidden = "{" + ", ".join(f"{rel}: {rel}" for rel in HIDDEN) + "}"
    for (runner, (paths, f2p, p2p)), hang in itertools.product(RUNS.items(), (False, True)):
        tid = task_id(runner) + ("-hang" if hang else "")
        d = tasks / tid
        d.mkdir()
        (d / "task.yaml").write_text(
            TASK_YAML.format(
                id=tid,
                commit=mini.base,
                install=f'install: "{INSTALL[runner]}"\n' if INSTALL[runner] else "",
                runner=runner,
                paths=_flow(paths),
                hidden=hidden,
                f2p=_flow(f2p),
                p2p=_flow(p2p),
                timeout=HANG_TIMEOUT if hang else timeout,
            )
        )
        _write(d, dict(HIDDEN))
        (d / "gold.patch").write_bytes(gold)
