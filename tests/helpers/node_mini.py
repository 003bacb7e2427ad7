"""A tiny Node.js repository and six tasks over it, one per Node.js runner (tap, node-test,
mocha, jest) and two more for the runners that read the repository's own configuration
(jest with a jest.config.js, vitest with a vitest.config.ts), for the Node.js attacks
(test_attacks_node.py).

The repository is `calc`: calc.js's mean() returns NaN for an empty list where it must
throw. Every task places the same hidden tests (one file per runner's style) and runs only
its own runner's files. mocha, jest and vitest come from the npm registry when the image is
built (the install step); tape is Debian's (/usr/share/nodejs, node's global path in the
node-20 image), node:test is node's own: those two tasks install nothing.

The configured variants start from commits of their own on top of the base: `jest-config`
adds a jest.config.js naming a setup file, a transform (a tiny one of the repository's own,
ES module imports to CommonJS) and a moduleNameMapper target, all under support/ (no test
directory: only the configuration makes them protected); `vitest` adds a vitest.config.ts
built from support/vitest.shared.ts with a setup file. Their hidden tests need all of that
(an ES module import, a global the setup file defines, the mapped module), and their lists
are written as other benchmarks write them (jest's `a › b`, vitest's `file > a > b`).
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
# what the tests' setup leaves them: the message an empty mean() throws
SUPPORT = "'use strict';\nglobalThis.EMPTY = /empty/;\n"
# a transform of the repository's own: ES module imports (static, and dynamic of a variable)
# and `export {}` to CommonJS
ESM_TRANSFORM = textwrap.dedent("""\
    'use strict';
    module.exports = {
      process(src) {
        const code = src
          .replace(/^import\\s+\\{([^}]*)\\}\\s+from\\s+(['"][^'"]+['"]);?$/gm,
            (_, names, spec) => `const {${names.replace(/\\s+as\\s+/g, ': ')}} = require(${spec});`)
          .replace(/^import\\s+(\\w+)\\s+from\\s+(['"][^'"]+['"]);?$/gm,
            (_, name, spec) => `const ${name} = require(${spec});`)
          .replace(/^import\\s+(['"][^'"]+['"]);?$/gm, 'require($1);')
          .replace(/\\bimport\\((\\w+)\\)/g, 'Promise.resolve().then(() => require($1))')
          .replace(/^export\\s+\\{\\s*\\};?$/gm, '');
        return { code };
      },
    };
    """)
# the commits the configured variants start from (over the base)
CONFIGURED = {
    "jest-config": {
        "jest.config.js": textwrap.dedent("""\
            'use strict';
            module.exports = {
              testEnvironment: 'node',
              setupFiles: ['<rootDir>/support/setup.js'],
              transform: { '\\\\.js$': '<rootDir>/support/esm.cjs' },
              moduleNameMapper: { '^#two$': '<rootDir>/support/two.js' },
            };
            """),
        "support/setup.js": SUPPORT,
        "support/esm.cjs": ESM_TRANSFORM,
        "support/two.js": "'use strict';\nmodule.exports = [1, 3];\n",
    },
    "vitest": {
        "vitest.config.ts": textwrap.dedent("""\
            import { defineConfig } from 'vitest/config';
            import { shared } from './support/vitest.shared';

            export default defineConfig({ test: { include: ['vt/**/*.test.ts'], ...shared } });
            """),
        "support/vitest.shared.ts": (
            "export const shared = { setupFiles: ['./support/vsetup.ts'], testTimeout: 5000 };\n"
        ),
        "support/vsetup.ts": "(globalThis as any).EMPTY = /empty/;\n",
    },
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
    # jest with the repository's configuration: an ES module import (the transform), a
    # global of the setup file, a mapped module
    "__tests__/mean.esm.test.js": textwrap.dedent("""\
        import { mean } from '../calc';
        import two from '#two';

        describe('mean', () => {
          test('empty throws', () => {
            expect(() => mean([])).toThrow(globalThis.EMPTY);
          });

          test('two', () => {
            expect(mean(two)).toBe(2);
          });
        });
        """),
    "vt/mean.test.ts": textwrap.dedent("""\
        import { describe, test, expect } from 'vitest';
        import { mean } from '../calc';

        describe('mean', () => {
          test('empty throws', () => {
            expect(() => mean([])).toThrow((globalThis as any).EMPTY);
          });

          test('two', () => {
            const xs: number[] = [1, 3];
            expect(mean(xs)).toBe(2);
          });
        });
        """),
}
NPM = "npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock"
# variant -> its runner, the commit it starts from, its install step (tape is Debian's,
# node:test is node's own)
VARIANTS = {
    "tap": ("tap", "base", ""),
    "node-test": ("node-test", "base", ""),
    "mocha": ("mocha", "base", f"{NPM} mocha@10.8.2"),
    "jest": ("jest", "base", f"{NPM} jest@29.7.0"),
    "jest-config": ("jest", "jest-config", f"{NPM} jest@29.7.0"),
    "vitest": ("vitest", "vitest", f"{NPM} vitest@3.2.4"),
}
INSTALL = {variant: install for variant, (_, _, install) in VARIANTS.items()}
# variant -> (test files it runs, FAIL_TO_PASS, PASS_TO_PASS)
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
    # as SWE-bench's and Multi-SWE-bench's jest and vitest parsers write them
    "jest-config": (["__tests__/mean.esm.test.js"], ["mean › empty throws"], ["mean two"]),
    "vitest": (["vt/mean.test.ts"], ["vt/mean.test.ts > mean > empty throws"], ["mean > two"]),
}
# the id each variant reports for its FAIL_TO_PASS test
REPORTED_F2P = {
    "tap": "test/mean.js::empty throws",
    "node-test": "test/mean.test.js::empty throws",
    "mocha": "test/mean.spec.js::mean > empty throws",
    "jest": "__tests__/mean.test.js::mean > empty throws",
    "jest-config": "__tests__/mean.esm.test.js::mean > empty throws",
    "vitest": "vt/mean.test.ts::mean > empty throws",
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


def task_id(variant: str) -> str:
    return "node-" + variant


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
    """The repository, and a way to turn file edits into a real git diff against the base
    (or the commit a configured variant starts from)."""

    def __init__(self, root: Path):
        self.src = root / "src"
        self.src.mkdir(parents=True)
        git("init", "-q", ".", cwd=self.src)
        _write(self.src, BASE_FILES)
        git("add", "-A", cwd=self.src)
        git("commit", "-qm", "base", cwd=self.src)
        self.base = git("rev-parse", "HEAD", cwd=self.src).strip()
        self.commits = {"base": self.base}
        for name, files in CONFIGURED.items():
            git("checkout", "-q", "-b", name, self.base, cwd=self.src)
            _write(self.src, files)
            git("add", "-A", cwd=self.src)
            git("commit", "-qm", name, cwd=self.src)
            self.commits[name] = git("rev-parse", "HEAD", cwd=self.src).strip()
        git("checkout", "-q", "main", cwd=self.src)

    def diff(self, files: dict[str, str | bytes | None], at: str = "base") -> bytes:
        """The diff of `files` against the commit `at` (base, or a configured variant's)."""
        git("checkout", "-q", "--detach", self.commits[at], cwd=self.src)
        _write(self.src, files)
        try:
            git("add", "-A", cwd=self.src)
            return subprocess.run(
                ["git", "diff", "--cached", "--binary"], cwd=self.src, check=True, capture_output=True
            ).stdout
        finally:
            git("reset", "-q", "--hard", "HEAD", cwd=self.src)
            git("clean", "-qfdx", cwd=self.src)
            git("checkout", "-q", "main", cwd=self.src)


def _flow(items: list[str]) -> str:
    import json

    return json.dumps(items)


HANG_TIMEOUT = 10  # the hang tasks' limit: a hang costs a test this long; an honest run takes 1-4 s
# the others' limit: generous, it is never waited out (jest with the repository's configuration
# starts jest twice, --showConfig at the base and the run: 40 s once on the loaded machine)


def write_tasks(tasks: Path, mini: NodeMini, *, timeout: int = 90) -> None:
    """Two tasks per variant under `tasks` (and the shared bundle): node-VARIANT, and
    node-VARIANT-hang, the same with a short time limit, for the hangs. Their instance
    images share every layer."""
    git("bundle", "create", "-q", str(tasks / "node-mini.bundle"), "--all", cwd=mini.src)
    hidden = "{" + ", ".join(f"{rel}: {rel}" for rel in HIDDEN) + "}"
    for (variant, (paths, f2p, p2p)), hang in itertools.product(RUNS.items(), (False, True)):
        runner, at, install = VARIANTS[variant]
        tid = task_id(variant) + ("-hang" if hang else "")
        d = tasks / tid
        d.mkdir()
        (d / "task.yaml").write_text(
            TASK_YAML.format(
                id=tid,
                commit=mini.commits[at],
                install=f'install: "{install}"\n' if install else "",
                runner=runner,
                paths=_flow(paths),
                hidden=hidden,
                f2p=_flow(f2p),
                p2p=_flow(p2p),
                timeout=HANG_TIMEOUT if hang else timeout,
            )
        )
        _write(d, dict(HIDDEN))
        (d / "gold.patch").write_bytes(mini.diff({"calc.js": FIXED}, at=at))
