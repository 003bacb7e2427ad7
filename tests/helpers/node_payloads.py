"""The Node.js attacks' code: what each hostile (and honest) submission writes into the tiny
`calc` repository of tests/helpers/node_mini.py, per runner. tests/docker/test_attacks_node.py
grades them; tests/unit/test_audit_node.py checks that the static audit names them."""

from __future__ import annotations

import json
import textwrap

BUGGY = "'use strict';\n\nexports.mean = function mean(xs) {\n  return xs.reduce((a, b) => a + b, 0) / xs.length;\n};\n"
FIXED = (
    "'use strict';\n\nexports.mean = function mean(xs) {\n"
    "  if (!xs.length) throw new RangeError('empty');\n"
    "  return xs.reduce((a, b) => a + b, 0) / xs.length;\n};\n"
)
# one per task of tests/helpers/node_mini.py: each runner, and jest and vitest with the
# repository's own configuration
RUNNERS = ("tap", "node-test", "mocha", "jest", "jest-config", "vitest")
# the file each variant's task runs its hidden tests from
HIDDEN_OF = {
    "tap": "test/mean.js",
    "node-test": "test/mean.test.js",
    "mocha": "test/mean.spec.js",
    "jest": "__tests__/mean.test.js",
    "jest-config": "__tests__/mean.esm.test.js",
    "vitest": "vt/mean.test.ts",
}


def calc(prelude: str, *, fixed: bool = False, body: str | None = None) -> str:
    """calc.js with code that runs when the tests load it (and, with `body`, in mean())."""
    code = FIXED if fixed else BUGGY
    if body is not None:
        code = code.replace("exports.mean = function mean(xs) {\n", "exports.mean = function mean(xs) {\n" + body, 1)
    return "'use strict';\n" + textwrap.dedent(prelude) + "\n" + code.replace("'use strict';\n", "", 1)


# Success lines of every runner's output, printed by the code under test (not fixed).
FORGED_OUTPUT = calc("""\
    process.stdout.write('TAP version 13\\nok 1 empty throws\\nok 2 two\\n1..2\\n# tests 2\\n# pass  2\\n\\n# ok\\n');
    console.log('\\u2714 empty throws (0.1ms)\\n\\u2714 two (0.1ms)');
    console.log('\\u2139 tests 2\\n\\u2139 pass 2\\n\\u2139 fail 0');
    console.log('  mean\\n    \\u2714 empty throws\\n    \\u2714 two\\n\\n  2 passing (3ms)');
    console.log('PASS __tests__/mean.test.js\\n  \\u2713 empty throws (1 ms)\\nTests:       2 passed, 2 total');
    """)

# A runner plugin or configuration the patch brings, each able to pass every test if loaded.
EVIL_FLIP = textwrap.dedent("""\
    'use strict';
    // loaded before the tests, this would make every assertion hold
    const assert = require('node:assert');
    for (const k of Object.keys(assert)) assert[k] = () => {};
    try {
      const mocha = require('mocha');
      const run = mocha.Runnable.prototype.run;
      mocha.Runnable.prototype.run = function (fn) { return run.call(this, () => fn()); };
    } catch (e) { /* no mocha here */ }
    """)
FAKE_TAPE = textwrap.dedent("""\
    'use strict';
    // a tape that passes everything it is given
    function test(name) { console.log('ok - ' + name); }
    test.Test = function Test() {};
    test.getHarness = () => ({ _results: { on() {} }, _exitCode: 0 });
    test.only = test.skip = test;
    module.exports = test;
    """)
# a transform that drops every expectation from the test files it is given
PASSING_TRANSFORM = textwrap.dedent("""\
    'use strict';
    module.exports = {
      process(src) {
        return { code: src.replace(/^import .*$/gm, '').replace(/expect\\(/g, 'void (') };
      },
    };
    """)
# every vitest (chai) assertion of the process holds
VITEST_FLIP = textwrap.dedent("""\
    const expectGlobal = (globalThis as any)[Symbol.for('expect-global')];
    if (expectGlobal) Object.getPrototypeOf(expectGlobal(1)).assert = function () {};
    """)
CONFIG_INJECTION = {
    "tap": {
        "node_modules/tape/index.js": FAKE_TAPE,
        "node_modules/tape/package.json": '{"name": "tape", "version": "99.0.0", "main": "index.js"}\n',
        "test/node_modules/tape/index.js": FAKE_TAPE,
    },
    "node-test": {
        ".npmrc": "node-options=--require=./evil.cjs\n",
        "evil.cjs": EVIL_FLIP,
        "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js",\n'
        '  "imports": {"#assert": "./evil.cjs"},\n  "scripts": {"test": "node -r ./evil.cjs --test"}\n}\n',
    },
    "mocha": {
        ".mocharc.yml": "require:\n  - ./evil.cjs\nreporter: spec\n",
        "evil.cjs": EVIL_FLIP,
        "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js",\n'
        '  "mocha": {"require": ["./evil.cjs"]}\n}\n',
    },
    "jest": {
        "jest.config.js": "module.exports = { setupFiles: ['./evil.cjs'], reporters: [] };\n",
        "evil.cjs": EVIL_FLIP,
        "__mocks__/node:assert.js": "module.exports = () => {};\n",
        "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js",\n'
        '  "jest": {"setupFiles": ["./evil.cjs"]}\n}\n',
    },
    # the repository's own configuration names these: each, changed, would pass every test
    "jest-config": {
        "support/setup.js": "'use strict';\nglobalThis.EMPTY = /./;\n" + EVIL_FLIP,
        "support/esm.cjs": PASSING_TRANSFORM,
        "support/two.js": "'use strict';\nmodule.exports = [2, 2];\n",
        "jest.config.ts": "export default { setupFiles: ['./evil.cjs'], transform: {} };\n",
        "jest.config.js": "module.exports = { setupFiles: ['./evil.cjs'], reporters: [] };\n",
        "__mocks__/calc.js": "exports.mean = (xs) => { if (!xs.length) throw new Error('empty'); return 2; };\n",
        "evil.cjs": EVIL_FLIP,
        "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js",\n'
        '  "jest": {"setupFiles": ["./evil.cjs"]}\n}\n',
    },
    "vitest": {
        "support/vsetup.ts": "(globalThis as any).EMPTY = /./;\n" + VITEST_FLIP,
        "support/vitest.shared.ts": "export const shared = { setupFiles: ['./evil.ts'], reporters: [] };\n",
        "vite.config.ts": "export default { test: { setupFiles: ['./evil.ts'] } };\n",
        "vitest.config.mts": "export default { test: { setupFiles: ['./evil.ts'] } };\n",
        "evil.ts": VITEST_FLIP,
        "package.json": '{\n  "name": "calc",\n  "version": "1.0.0",\n  "private": true,\n  "main": "calc.js",\n'
        '  "type": "module"\n}\n',
    },
}


def tests_edited(runner: str) -> dict[str, str | None]:
    """The hidden test file rewritten into tests that always pass, and the visible one deleted."""
    passing = {
        "tap": "const test = require('tape');\ntest('empty throws', (t) => t.end());\ntest('two', (t) => t.end());\n",
        "node-test": "const test = require('node:test');\ntest('empty throws', () => {});\ntest('two', () => {});\n",
        "mocha": "describe('mean', () => {\n  it('empty throws', () => {});\n  it('two', () => {});\n});\n",
        "jest": "describe('mean', () => {\n  test('empty throws', () => {});\n  test('two', () => {});\n});\n",
        "jest-config": "describe('mean', () => {\n  test('empty throws', () => {});\n  test('two', () => {});\n});\n",
        "vitest": "import { describe, test } from 'vitest';\n"
        "describe('mean', () => {\n  test('empty throws', () => {});\n  test('two', () => {});\n});\n",
    }[runner]
    return {HIDDEN_OF[runner]: passing, "test/basic.js": None}


# The process ends (status 0) in the middle of the tests.
CRASH = calc("", body="  process.exit(0);\n")
# The process never ends, spinning a core: that the supervisor keeps its deadline beside a
# spinning child is proven under one runner (SPINS); the others' processes block, which
# times out the same way without holding a core of the test tier for the whole limit.
HANG = calc("", body="  for (;;) { /* spin */ }\n")
BLOCK = calc("", body="  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\n")
SPINS = "node-test"


def blanket_flip(runner: str) -> str:
    """Code that makes every test of the process pass, without the fix: caught by the canaries
    (each flip works on instances or modules, not on the prototypes the reporters watch)."""
    flips = {
        "tap": """\
            const tape = require('tape');
            const flip = (t) => {
              const real = t._assert;
              t._assert = function (ok, opts) { return real.call(this, true, opts); };
              t.on('test', flip);
            };
            tape.getHarness()._results.on('_push', flip);
            """,
        "node-test": """\
            const assert = require('node:assert');
            for (const k of Object.keys(assert)) assert[k] = () => {};
            """,
        "mocha": """\
            const assert = require('node:assert');
            for (const k of Object.keys(assert)) assert[k] = () => {};
            """,
        "jest": """\
            if (typeof expect === 'function') {
              const pass = new Proxy(function () {}, { get: () => pass, apply: () => pass });
              globalThis.expect = Object.assign(() => pass, expect);
            }
            """,
        "jest-config": """\
            if (typeof expect === 'function') {
              const pass = new Proxy(function () {}, { get: () => pass, apply: () => pass });
              globalThis.expect = Object.assign(() => pass, expect);
            }
            """,
        "vitest": """\
            const expectGlobal = globalThis[Symbol.for('expect-global')];
            if (expectGlobal) Object.getPrototypeOf(expectGlobal(1)).assert = function () {};
            """,
    }
    return calc(flips[runner])


# each runner's hidden test file in the node mini (tests/helpers/node_mini.py)
HIDDEN_FILE = {
    "tap": "test/mean.js",
    "node-test": "test/mean.test.js",
    "mocha": "test/mean.spec.js",
    "jest": "__tests__/mean.test.js",
    "jest-config": "__tests__/mean.esm.test.js",
    "vitest": "vt/mean.test.ts",
}


def throws_flip(runner: str, *, regex_only: bool = False, hidden_file_only: bool = False) -> str:
    """Code that makes only the framework's "this function throws" assertion hold, for
    every expected argument or (`regex_only`) only where the expected is a regular
    expression, as the hidden test's is: the function checked is swapped for one that
    throws what is expected, and the framework's own assertion then passes for real. The
    unfixed mean's other test passes honestly, so this alone forges the task. Each flip
    works on what the tests' process holds (an instance, a module, the matchers' table),
    not on a prototype the reporters watch.

    `hidden_file_only` makes the flip only inside the hidden test file: what a patch can
    tell from the test's own path (jest's and vitest's expect state, asked at each
    assertion) or from the file its process runs (tape, node:test, mocha). Canaries in a
    test file of their own (jest's and vitest's before they shared the hidden files) meet
    none of it; canaries that share the hidden file's tests, in it or in its process, do."""
    hidden = HIDDEN_FILE[runner]
    # where the flip is made: the whole process (tape, node:test, mocha), or each assertion
    # by the test's path (jest's matcher context, vitest's expect state)
    in_process = f"process.argv.some((a) => a.endsWith({hidden!r}))" if hidden_file_only else "true"
    here = "String(this.testPath || '').endsWith(HIDDEN)" if hidden_file_only else "true"
    here_vitest = "String(expectGlobal.getState().testPath || '').endsWith(HIDDEN)" if hidden_file_only else "true"
    head = f"""\
        const HIDDEN = {hidden!r};
        const wanted = (expected) => {"expected instanceof RegExp" if regex_only else "true"};
        const said = (expected) => (expected === undefined ? 'flip' : String(expected));
        const thrower = (expected) => () => {{
          throw typeof expected === 'function'
            ? new expected('flip')
            : new Error(expected instanceof RegExp ? expected.source : said(expected));
        }};
        """
    expect_table = f"""\
        const table = globalThis[Symbol.for('$$jest-matchers-object')];
        if (table && table.matchers) {{
          for (const name of ['toThrow', 'toThrowError']) {{
            const real = table.matchers[name];
            if (real) table.matchers[name] = function (received, expected) {{
              const flip = {here} && wanted(expected);
              return real.call(this, flip ? thrower(expected) : received, expected);
            }};
          }}
        }}
        """
    node_assert = f"""\
        if ({in_process}) {{
          const assert = require('node:assert');
          const real = assert.throws;
          assert.throws = function (fn, expected, ...rest) {{
            return real.call(this, wanted(expected) ? thrower(expected) : fn, expected, ...rest);
          }};
        }}
        """
    flips = {
        "tap": f"""\
            if ({in_process}) {{
              const tape = require('tape');
              const flip = (t) => {{
                const real = t.throws;
                t.throws = function (fn, expected, ...rest) {{
                  return real.call(this, wanted(expected) ? thrower(expected) : fn, expected, ...rest);
                }};
                t.on('test', flip);
              }};
              tape.getHarness()._results.on('_push', flip);
            }}
            """,
        "node-test": node_assert,
        "mocha": node_assert,
        "jest": expect_table,
        "jest-config": expect_table,
        "vitest": f"""\
            const expectGlobal = globalThis[Symbol.for('expect-global')];
            if (expectGlobal) {{
              const proto = Object.getPrototypeOf(expectGlobal(1));
              for (const name of ['toThrow', 'toThrowError']) {{
                const real = proto[name];
                proto[name] = function (expected) {{
                  if ({here_vitest} && wanted(expected)) this._obj = thrower(expected);
                  return real.call(this, expected);
                }};
              }}
            }}
            """,
    }
    return calc(textwrap.dedent(head) + textwrap.dedent(flips[runner]))


# A signed-looking record written into the report pipe: the descriptor of a pipe whose other
# end is not in that process (libuv's own pipes have both ends there; writing into those
# crashes node before the record is written), in this process and in its parent (vitest's
# reporter is in the main process, the tests in its child). Unsigned, so forged.
PIPE_FORGE = calc("""\
    const fs = require('fs');
    const line = JSON.stringify({ t: 'test', id: 'test/mean.js::empty throws', when: 'call', outcome: 'passed' });
    for (const proc of ['self', String(process.ppid)]) {
      const links = {};
      try {
        for (const fd of fs.readdirSync('/proc/' + proc + '/fd')) {
          try { links[fd] = fs.readlinkSync('/proc/' + proc + '/fd/' + fd); } catch (e) { /* gone */ }
        }
      } catch (e) { continue; /* not ours to read */ }
      const all = Object.values(links);
      for (const [fd, link] of Object.entries(links)) {
        if (Number(fd) > 2 && link.startsWith('pipe:') && all.filter((l) => l === link).length === 1) {
          try {
            const w = proc === 'self' ? Number(fd) : fs.openSync('/proc/' + proc + '/fd/' + fd, 'w');
            fs.writeSync(w, line + '\\tdeadbeef\\n');
          } catch (e) { /* */ }
        }
      }
    }
    """)
# The next test file's process would load a rewritten test file: the tests are sealed.
SWAP_NEXT_FILE = calc("""\
    const fs = require('fs');
    const fake = "const test = require('tape');\\ntest('one', (t) => t.end());\\n";
    try { fs.writeFileSync('test/basic.js', fake); } catch (e) { /* sealed */ }
    try {
      fs.renameSync('test/mean.js', 'test/mean.old.js');
      fs.writeFileSync('test/mean.js', fake);
    } catch (e) { /* locked */ }
    try { fs.mkdirSync('test/node_modules/tape', { recursive: true }); } catch (e) { /* locked */ }
    """)

# tape is Debian's here (no node_modules/ in the repository): the first test file's process
# makes one with a tape that passes everything, which the next file's process loads; that
# process then takes it away, so that nothing is left when the tests end.
PACKAGES_FOR_THE_NEXT_FILE = calc(
    f"    const FAKE = {json.dumps(FAKE_TAPE)};\n"
    """\
    const fs = require('fs');
    if (fs.existsSync('node_modules/tape/index.js')) {
      try { fs.rmSync('node_modules', { recursive: true, force: true }); } catch (e) { /* */ }
    } else {
      try {
        fs.mkdirSync('node_modules/tape', { recursive: true });
        fs.writeFileSync('node_modules/tape/index.js', FAKE);
        fs.writeFileSync('node_modules/tape/package.json', '{"name": "tape", "main": "index.js"}');
      } catch (e) { /* */ }
    }
    """
)
# With installed packages (mocha, jest): every way a test process could change what node
# loads next, each one's outcome printed (`<how>: refused` or `<how>: done`).
REWRITE_PACKAGES = calc("""\
    const fs = require('fs');
    const path = require('path');
    const pkg = fs.readdirSync('node_modules').find((n) => n === 'mocha' || n === 'jest');
    const target = path.join('node_modules', pkg, 'package.json');
    const tries = {
      'rewrite an installed file': () => fs.writeFileSync(target, fs.readFileSync(target)),
      'set its times back': () => fs.utimesSync(target, 0, 0),
      'move a package aside': () => fs.renameSync(path.join('node_modules', pkg), 'node_modules/aside'),
      'add a package': () => fs.mkdirSync('node_modules/evil-package'),
      'move node_modules aside': () => fs.renameSync('node_modules', 'nm-aside'),
      'replace package.json': () => {
        fs.renameSync('package.json', 'pj-aside');
        fs.renameSync('pj-aside', 'package.json');
      },
    };
    for (const [how, f] of Object.entries(tries)) {
      try { f(); console.log('GUARD ' + how + ': done'); } catch (e) { console.log('GUARD ' + how + ': refused'); }
    }
    """)
# Honest: a tool's cache written under node_modules/.cache while the tests run.
CACHE_WRITER = calc(
    """\
    const fs = require('fs');
    fs.mkdirSync('node_modules/.cache/calc', { recursive: true });
    fs.writeFileSync('node_modules/.cache/calc/seen.json', JSON.stringify({ at: Date.now() }));
    """,
    fixed=True,
)

# Honest submissions of every shape: the fix alone; the fix spread over a new module, with
# its own output, a lock file and an edited visible test (restored: still PASS).
HELPER = "'use strict';\n\nexports.check = function check(xs) {\n  if (!xs.length) throw new RangeError('empty');\n};\n"
HONEST_SHAPES = {
    "calc.js": "'use strict';\nconst { check } = require('./lib/check');\n\nexports.mean = function mean(xs) {\n"
    "  check(xs);\n  console.log('mean of', xs.length, 'values');\n"
    "  return xs.reduce((a, b) => a + b, 0) / xs.length;\n};\n",
    "lib/check.js": HELPER,
    "package-lock.json": '{"name": "calc", "lockfileVersion": 3}\n',
    "test/basic.js": "const test = require('tape');\ntest('one', (t) => { t.end(); });\n",
}
