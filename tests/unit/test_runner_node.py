"""The Node.js runners (grader/box/runners/tap.py, node_test.py, mocha.py, jest.py, vitest.py
over nodejs.py), without Docker: the plan of a check, the options a task may not give, what
is protected (jest's and vitest's configurations and the files they name included), the
canaries' shape, how the units' signed reports fold into one verdict's report (a crashed
file's tests never pass, the canaries' failures leave the exit status), and ids written as
other benchmarks write them."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import time
from pathlib import Path

import pytest

from grader.box import hidden
from grader.box import runners as box_runners
from grader.box import tree as boxtree
from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.box.protect import Protection
from grader.box.record import replace
from grader.box.runners import jest, mocha, node_test, nodejs, tap, vitest
from grader.grading.spec import APPLY_CHAIN, CONTAINER_ENV
from grader.tasks import model

RUNNERS = {"tap": tap, "node-test": node_test, "mocha": mocha, "jest": jest, "vitest": vitest}


def test_the_node_runners_are_registered_and_say_what_decides():
    assert set(RUNNERS) <= set(box_runners.test_runners())
    for name, module in RUNNERS.items():
        assert box_runners.runner(name) is module
        assert module.TESTS is True and module.COMMAND == "optional"
        assert module.DECIDED_BY == "test report"
        assert (module.EXIT_PASSED, module.EXIT_FAILED) == (0, 1)
        assert module.PROTECT is nodejs.NODE_PROTECT
        assert module.listed_files(["test/a.js::x > y", "test/b.js::z"]) == ["test/a.js", "test/b.js"]


# --- plan -------------------------------------------------------------------------------------


def test_plan_runs_the_hidden_test_files_and_the_listed_ones_one_per_unit():
    hidden = {"test/parse.js": "d1", "test/utils.js": "d2", "test/gone.js": None, "test/fixture.json": "d3"}
    check = {"fail_to_pass": ["test/parse.js::parse() > a"], "pass_to_pass": ["test/other.js::b"], "args": []}
    spec = tap.plan(check, hidden)
    assert spec.kind == "tap"
    assert spec.paths == ["test/other.js", "test/parse.js", "test/utils.js"]
    assert spec.canaries and spec.canary_dir == "test"
    assert spec.canary_sources == ["test/parse.js", "test/utils.js"]
    assert "parse" in spec.canary_words
    assert spec.command is None and spec.args == []


def test_plan_keeps_the_tasks_paths_args_and_command():
    check = {
        "paths": [".build/tests/api.js"],
        "args": ["--timeout", "20000"],
        "command": "tsc -p .",
        "fail_to_pass": [".build/tests/api.js::optimism > x"],
    }
    spec = mocha.plan(check, {"src/tests/api.ts": "d"})
    assert spec.paths == [".build/tests/api.js"] and spec.args == ["--timeout", "20000"]
    assert spec.command == "tsc -p ." and spec.canary_dir == ".build/tests"
    assert spec.canary_sources == ["src/tests/api.ts"]  # the hidden sources the compiled tests come from


@pytest.mark.parametrize(
    "name, arg",
    [
        ("tap", "-r"),
        ("tap", "--require=./evil.js"),
        ("tap", "-r./evil.js"),
        ("tap", "--import"),
        ("tap", "--inspect=0"),
        ("tap", "--expose-internals"),
        ("node-test", "--test"),
        ("node-test", "--test-reporter=tap"),
        ("node-test", "--experimental-loader=./x.mjs"),
        ("mocha", "--require"),
        ("mocha", "--config=.mocharc.js"),
        ("mocha", "--reporter"),
        ("mocha", "--parallel"),
        ("mocha", "--node-option=require=./x.js"),
        ("jest", "--config"),
        ("jest", "-c"),
        ("jest", "--setupFiles=./x.js"),
        ("jest", "--reporters=./r.js"),
        ("jest", "--testEnvironment=./env.js"),
        ("jest", "-w=4"),
        ("vitest", "--reporter=json"),
        ("vitest", "--config=vitest.other.ts"),
        ("vitest", "--pool=threads"),
        ("vitest", "--poolOptions.threads.singleThread"),
        ("vitest", "--environment=./support/env.ts"),
        ("vitest", "--browser"),
        ("vitest", "--coverage.enabled"),
        ("vitest", "--root=/"),
        ("vitest", "-u"),
        ("vitest", "--execArgv=--require=./x.js"),
    ],
)
def test_options_that_load_code_or_replace_the_reporter_are_refused(name, arg):
    with pytest.raises(ValueError, match="sets"):
        RUNNERS[name].plan({"paths": ["test/a.js"], "args": [arg]}, {})


@pytest.mark.parametrize(
    "name, arg",
    [
        ("tap", "--expose-gc"),
        ("tap", "--no-warnings"),
        ("node-test", "--stack-size=2000"),
        ("mocha", "--timeout"),
        ("mocha", "--ui=tdd"),
        ("mocha", "--inline-diffs"),
        ("jest", "--testTimeout=10000"),
        ("jest", "--verbose"),
        ("vitest", "--testTimeout=10000"),
        ("vitest", "--sequence.shuffle=false"),
    ],
)
def test_ordinary_options_are_taken(name, arg):
    assert RUNNERS[name].plan({"paths": ["test/a.js"], "args": [arg]}, {}).args == [arg]


@pytest.mark.parametrize("path", ["/etc/passwd", "../x.js", "-r", "a/../../b.js"])
def test_paths_outside_the_repository_or_like_options_are_refused(path):
    with pytest.raises(ValueError):
        tap.plan({"paths": [path]}, {})


def test_a_check_with_nothing_to_run_is_refused():
    with pytest.raises(ValueError, match="needs paths"):
        node_test.plan({}, {"test/data.json": "d"})


def test_the_task_model_takes_a_command_for_a_build_step_but_not_pytest_options():
    ok = model.TestsCheck(type="tests", runner="mocha", paths=["a.js"], command="tsc")
    assert ok.command == "tsc"
    assert model.TestsCheck(type="tests", runner="tap", paths=["a.js"]).command is None
    with pytest.raises(ValueError):
        model.TestsCheck(type="tests", runner="jest", paths=["a.js"], pytest_args=["-x"])


def test_words_come_from_js_test_names():
    ids = ["test/a.js::parse() > strictMerge wraps object and primitive", "t.js::`duplicates` option"]
    got = nodejs.words(ids)
    assert {"parse", "strictmerge", "wraps", "duplicates", "option"} <= set(got)
    assert all(re.fullmatch(r"[a-z][a-z0-9]{1,15}", w) for w in got)


# --- protection -------------------------------------------------------------------------------


def protection(files: list[str], hidden: list[str]) -> Protection:
    rules = nodejs.NODE_PROTECT
    spec = ProtectSpec(
        files=hidden,
        names=rules["names"],
        suffixes=rules["suffixes"],
        prefixes=rules["prefixes"],
        dir_suffixes=rules["dir_suffixes"],
        tests=True,
        test_modules=rules["test_modules"],
        test_dir_names=rules["test_dir_names"],
        globs=[],
    )
    return Protection(spec, {f: ("f", 0o644, 1, 1) for f in files})


def test_node_protection_covers_tests_configuration_and_installed_packages_but_not_the_library():
    files = [
        "index.js",
        "lib/parse.js",
        "package.json",
        "test/parse.js",
        "test/helpers.js",
        "src/x.test.ts",
        "src/y.spec.js",
        "__tests__/a.test.js",
        "node_modules/tape/index.js",
        "lib/node_modules/x/index.js",
        ".mocharc.yml",
        "jest.config.js",
        "babel.config.cjs",
        ".babelrc",
        "tsconfig.json",
        "tsconfig.build.json",
        ".npmrc",
        "package-lock.json",
        "build/addon.node",
        "__mocks__/fs.js",
        "types/index.d.ts",
        "lib/testing.js",
        "vite.config.ts",
        "vitest.config.mts",
        "vitest.workspace.ts",
        "src/__snapshots__/x.test.ts.snap",
        "postcss.config.cjs",
    ]
    p = protection(files, ["test/parse.js"])
    protected = {f for f in files if p.why(f)}
    assert protected == set(files) - {"index.js", "lib/parse.js", "types/index.d.ts", "lib/testing.js"}
    assert p.why("test/parse.js") == "hidden or listed test"
    assert p.why("test/helpers.js") == "in a test directory"
    assert p.why("node_modules/tape/index.js") == "packaging metadata"  # the supervisor's word for it
    assert p.why("node_modules/new-package/index.js")  # a package the patch would bring
    assert p.why("test/node_modules/tape/index.js")


# --- canaries ---------------------------------------------------------------------------------


def make_tree(root: Path, files: dict[str, str]) -> boxtree.Tree:
    for rel, content in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    return boxtree.Tree(str(root), os.getuid(), os.getgid())


def order(tmp_path: Path, check: CheckSpec) -> Order:
    return Order(
        repo=str(tmp_path),
        patch="/opt/grader/run/submission.patch",
        touched=[],
        hidden_dir=str(tmp_path / ".hidden"),
        uid=os.getuid(),
        gid=os.getgid(),
        deadline=30.0,
        output_limit=65536,
        report_limit=8 << 20,
        apply_chain=[(m, list(a)) for m, a in APPLY_CHAIN],
        protect=ProtectSpec(
            files=[],
            names=[],
            suffixes=[],
            prefixes=[],
            dir_suffixes=[],
            tests=True,
            test_modules=[],
            test_dir_names=[],
            globs=[],
        ),
        pycache="/tmp/pycache",
        check=check,
        env=dict(CONTAINER_ENV),
    )


HIDDEN_TAPE = (
    "'use strict';\nvar test = require('tape');\nvar qs = require('../');\nvar utils = require('../lib/utils');\n"
    "var other = require('./utils');\n\ntest('parse()', function (t) { t.end(); });\n"
)


def tape_job(tmp_path: Path, extra: dict[str, str] | None = None) -> tuple[Order, boxtree.Tree]:
    files = {"package.json": '{"name": "qs"}', "test/parse.js": HIDDEN_TAPE, "test/utils.js": "", **(extra or {})}
    tree = make_tree(tmp_path, files)
    spec = tap.plan(
        {"paths": ["test/parse.js", "test/utils.js"], "fail_to_pass": ["test/parse.js::parse() > strict merge"]},
        {"test/parse.js": "d", "test/utils.js": "d"},
    )
    return order(tmp_path, spec), tree


def test_canaries_run_in_each_test_files_process_named_as_its_tests(tmp_path):
    j, tree = tape_job(tmp_path)
    c = tap.make_canaries(j, tree)
    path = tmp_path / c["path"]
    assert re.fullmatch(r"test/[a-z0-9-]+\.js", c["path"]) and c["path"] not in j.check.paths
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == c["digest"]
    assert path.stat().st_uid == 0 and (path.stat().st_mode & 0o777) == 0o444
    names = {tid.split("::", 1)[1] for tid in c["expect"]}
    assert 4 <= len(names) <= 6
    # every canary test once per test file's process, under that file's name
    assert set(c["expect"]) == {f"{unit}::{n}" for unit in j.check.paths for n in names}
    assert {"passed", "failed"} == set(c["expect"].values())
    for n in names:
        assert n not in HIDDEN_TAPE
    source = data.decode()
    assert "require('tape')" in source and source.count("\ntest(") == len(names)
    # it loads what the hidden tests load, the test files the check runs aside
    assert 'require("../")' in source and 'require("../lib/utils")' in source
    assert 'require("./utils")' not in source
    again = tap.make_canaries(j, tree)
    assert again["path"] != c["path"]


def test_canaries_of_jest_and_vitest_are_appended_to_every_test_file_of_the_run(tmp_path):
    """Each test file the check runs gets the same canaries at its end (a flip keyed on the
    test's file meets them there), judged per file; the files are root's, read-only, and
    their digests are what the verify step expects."""
    files = {
        "package.json": "{}",
        "__tests__/mean.test.js": "const m = require('../calc');\ntest('mean', () => { expect(m(1, 3)).toBe(2); });",
        "__tests__/sum.test.js": "const s = require('../sum');\ntest('sum', () => expect(s(1, 2)).toBe(3));\n",
    }
    tree = make_tree(tmp_path, files)
    paths = ["__tests__/mean.test.js", "__tests__/sum.test.js"]
    c = jest.make_canaries(order(tmp_path, jest.plan({"paths": paths}, {p: "d" for p in paths})), tree)
    assert "path" not in c and sorted(c["files"]) == paths
    names = [t[0] for t in c["tests"]]
    assert sorted(c["expect"]) == sorted(f"{p}::{n}" for p in paths for n in names)
    assert "failed" in c["expect"].values() and "passed" in c["expect"].values()
    for rel in paths:
        data = (tmp_path / rel).read_bytes()
        assert data.decode().startswith(files[rel]) and hashlib.sha256(data).hexdigest() == c["files"][rel]
        tail = data.decode()[len(files[rel]) :]
        reg = re.match(r"\n;\nconst (_[a-z]{12}) = globalThis\.test;\n", tail).group(1)
        # registered by jest's own test; asserting with the file's expect (the global)
        assert tail.count(f"\n{reg}(") == len(names) and "expect(" in tail and "require(" not in tail
        st = (tmp_path / rel).stat()
        assert (st.st_uid, st.st_mode & 0o777) == (0, 0o444)
    assert hidden.canary_files(c) == c["files"]
    # vitest, TypeScript: registered by its own test under a name of this run's; its expect
    # imported where the file has none (shared with the file's tests), else the file's own
    for text, imported in [("import { it } from 'vitest';\n", True), ("import { it, expect } from 'vitest';\n", False)]:
        tree = make_tree(tmp_path / "v", {"package.json": "{}", "src/a.test.ts": text})
        c = vitest.make_canaries(order(tmp_path / "v", vitest.plan({"paths": ["src/a.test.ts"]}, {})), tree)
        tail = (tmp_path / "v/src/a.test.ts").read_text()[len(text) :]
        reg = re.match(r"\n;\nimport \{ test as (_[a-z]{12}) \} from 'vitest';\n", tail).group(1)
        assert ("import { expect } from 'vitest';" in tail) is imported and f"\n{reg}(" in tail


@pytest.mark.parametrize(
    "text, binding",
    [
        ("test('x', () => expect(1).toBe(1));", "none"),
        ("import { describe, expect, it } from 'vitest';", "framework"),
        ("import type { Mock } from 'vitest';\nimport { expect as e } from 'vitest';", "none"),
        ("const { expect, test } = require('@jest/globals');", "framework"),
        ("import { expect } from '@jest/globals';", "framework"),
        ("import { expect } from 'chai';", "other"),
        ("const { expect } = require('chai');", "other"),
        ("const expect = require('expect');", "other"),
        ("import expect from 'expect';", "other"),
        ("import * as expect from 'expect';", "other"),
        ("const { assert, expect } = chai;", "other"),
        ("let expect;\nexpect = makeExpect();", "other"),
        ("import { assert as expect } from 'vitest';\nimport { expect } from 'chai';", "other"),
        ("const { expect: check } = require('chai');", "none"),
        ("it('x', () => { expect(a == b).toBe(true); expect(x => x).toBeDefined(); });", "none"),
    ],
)
def test_how_a_test_file_binds_expect(text, binding):
    assert nodejs.expect_binding(text) == binding


@pytest.mark.parametrize(
    "runner, rel, text, config",
    [
        (jest, "a.test.js", "test.only('x', () => {});\n", None),
        (jest, "a.test.js", "fit('x', () => {});\n", None),
        (vitest, "a.test.ts", "describe.only('x', () => {});\n", None),
        (jest, "a.test.js", "afterEach(() => { expect(spy).toHaveBeenCalled(); });\n", None),
        (vitest, "a.test.ts", "afterAll(() => { assert.ok(server.closed); });\n", None),
        (jest, "a.test.js", "beforeEach(() => {\n  expect.assertions(1);\n});\n", None),
        (vitest, "a.test.cjs", "const { test } = require('vitest');\n", None),
        (jest, "a.test.ts", "test('x', () => {});\n", {"configs": [{"injectGlobals": False}]}),
        (vitest, "a.test.ts", "import { expect } from 'chai';\nimport { it } from 'vitest';\n", None),
        (jest, "a.test.js", "const { expect } = require('chai');\n", None),
    ],
    ids=[
        "test.only",
        "fit",
        "describe.only",
        "afterEach",
        "afterAll",
        "beforeEach-asserts",
        "vitest-cjs",
        "no-globals",
        "chai-import",
        "chai-require",
    ],
)
def test_a_file_that_cannot_take_the_canaries_leaves_them_a_file_of_their_own(tmp_path, runner, rel, text, config):
    tree = make_tree(tmp_path, {"package.json": "{}", rel: text, "b.test.js": "test('y', () => {});\n"})
    spec = runner.plan({"paths": ["b.test.js", rel]}, {})
    if config is not None:
        spec.base_config = {"file": "jest.config.js", "files": [], "shown": config}
    c = runner.make_canaries(order(tmp_path, spec), tree)
    assert "files" not in c and all(tid.startswith(c["path"] + "::") for tid in c["expect"])
    assert (tmp_path / rel).read_text() == text and (tmp_path / "b.test.js").read_text() == "test('y', () => {});\n"


def test_hooks_that_assert_nothing_keep_the_canaries_in_the_file(tmp_path):
    text = (
        "beforeEach(() => {\n  vi.useFakeTimers();\n});\nafterEach(() => vi.restoreAllMocks());\n"
        "afterAll(async () => { await server.close(); });\ntest('x', () => {\n  expect(1).toBe(1);\n});\n"
    )
    tree = make_tree(tmp_path, {"package.json": "{}", "a.test.ts": text})
    c = vitest.make_canaries(order(tmp_path, vitest.plan({"paths": ["a.test.ts"]}, {})), tree)
    assert list(c["files"]) == ["a.test.ts"]


def test_canaries_of_jest_are_one_more_test_file_where_a_file_cannot_take_them(tmp_path):
    tree = make_tree(
        tmp_path,
        {"package.json": "{}", "__tests__/mean.test.js": "const m = require('./c');\nafterEach(() => expect(n));\n"},
    )
    spec = jest.plan({"paths": ["__tests__/mean.test.js"]}, {"__tests__/mean.test.js": "d"})
    c = jest.make_canaries(order(tmp_path, spec), tree)
    assert re.fullmatch(r"__tests__/[a-z0-9-]+\.test\.js", c["path"])
    assert all(tid.startswith(c["path"] + "::") for tid in c["expect"])
    source = (tmp_path / c["path"]).read_text()
    assert "expect(" in source and 'require("./c")' in source


def test_canaries_follow_the_module_kind_of_their_place(tmp_path):
    tree = make_tree(
        tmp_path,
        {"package.json": '{"type": "module"}', "test/a.test.js": "import { x } from '../index.js';\n"},
    )
    spec = node_test.plan({"paths": ["test/a.test.js"]}, {"test/a.test.js": "d"})
    c = node_test.make_canaries(order(tmp_path, spec), tree)
    source = (tmp_path / c["path"]).read_text()
    assert source.startswith("import test from 'node:test';")
    assert 'await import("../index.js")' in source and "require(" not in source
    assert nodejs.module_kind(tree, "test/a.test.js") == "esm"
    assert nodejs.module_kind(tree, "test/a.test.cjs") == "cjs"
    # tape requires its canaries: an ES module place has none, and says why
    spec = tap.plan({"paths": ["test/a.test.js"]}, {"test/a.test.js": "d"})
    assert "skipped" in tap.make_canaries(order(tmp_path, spec), tree)


def test_a_build_command_defers_the_canary_file_until_it_ran(tmp_path):
    tree = make_tree(tmp_path, {"package.json": '{"type": "module"}', "src/tests/api.ts": ""})
    spec = mocha.plan({"paths": [".build/tests/api.js"], "command": "tsc"}, {"src/tests/api.ts": "d"})
    c = mocha.make_canaries(order(tmp_path, spec), tree)
    assert c["digest"] is None and not (tmp_path / c["path"]).exists()
    (tmp_path / ".build").mkdir()
    (tmp_path / ".build" / "package.json").write_text('{"type": "commonjs"}')  # what the command wrote
    assert nodejs.write_canaries(tree, c)
    source = (tmp_path / c["path"]).read_text()
    assert source.startswith("'use strict';") and "\nit(" in source
    assert hashlib.sha256(source.encode()).hexdigest() == c["digest"]


@pytest.mark.parametrize(
    "name, arg",
    [
        ("mocha", "--grep=x"),
        ("mocha", "-b"),
        ("mocha", "--bail"),
        ("jest", "-t"),
        ("jest", "--testNamePattern=x"),
        ("vitest", "-t"),
        ("vitest", "--bail=1"),
        ("vitest", "--project=a"),
    ],
)
def test_options_that_stop_early_or_select_by_name_turn_the_canaries_off(tmp_path, name, arg):
    tree = make_tree(tmp_path, {"test/a.js": ""})
    spec = RUNNERS[name].plan({"paths": ["test/a.js"], "args": [arg]}, {})
    assert "skipped" in RUNNERS[name].make_canaries(order(tmp_path, spec), tree)


def test_no_canaries_when_the_task_turns_them_off(tmp_path):
    tree = make_tree(tmp_path, {"test/a.js": ""})
    spec = tap.plan({"paths": ["test/a.js"], "canaries": False}, {})
    assert tap.make_canaries(order(tmp_path, spec), tree) is None


@pytest.mark.parametrize("seed", range(30))
def test_canary_checks_are_the_runners_own_assertions(seed):
    rng = random.Random(seed)
    for style, marker in (("tape", "t."), ("jest", "expect("), ("assert", "assert.")):
        for must_pass in (True, False):
            line = nodejs.canary_check(rng, must_pass, style)
            assert line.strip().startswith(marker) and line.endswith(";\n")


def _run_js_check(line: str) -> None:
    """Evaluate a generated assert-style check in Python: the shapes are simple arithmetic,
    strings, sorting, hashing and JSON, so they translate one to one."""
    m = re.fullmatch(r"  assert\.strictEqual\((.*), (.*)\);\n", line)
    if m:
        got, want = m.group(1), json.loads(m.group(2))
        if got.endswith(".reduce((a, b) => a + b, 0)"):
            value = sum(json.loads(got[: -len(".reduce((a, b) => a + b, 0)")]))
        elif ".repeat(" in got:
            w, k = re.fullmatch(r"(\".*\")\.repeat\((\d+)\)\.length", got).groups()
            value = len(json.loads(w)) * int(k)
        elif "createHash" in got:
            seed = re.search(r"update\((\".*?\")\)", got).group(1)
            value = hashlib.sha256(json.loads(seed).encode()).hexdigest()[:10]
        else:
            xs, i = re.fullmatch(r"(\[.*\])\.sort\(\(a, b\) => a - b\)\[(\d+)\]", got).groups()
            value = sorted(json.loads(xs))[int(i)]
        assert value == want
        return
    m = re.fullmatch(r"  assert\.throws\(\(\) => JSON\.parse\((.*)\), SyntaxError\);\n", line)
    assert m, line
    json.loads(json.loads(m.group(1)))  # raises (the check holds) only for the broken text


@pytest.mark.parametrize("seed", range(40))
def test_canary_checks_hold_exactly_when_they_must(seed):
    rng = random.Random(seed)
    for must_pass in (True, False):
        line = nodejs.canary_check(rng, must_pass, "assert")
        if "assert.throws" in line:
            arg = json.loads(re.search(r"JSON\.parse\((.*)\), SyntaxError", line).group(1))
            try:
                json.loads(arg)
                threw = False
            except ValueError:
                threw = True
            assert threw is must_pass
            continue
        try:
            _run_js_check(line)
            held = True
        except AssertionError:
            held = False
        assert held is must_pass, line


# --- folding the units' reports ---------------------------------------------------------------


def run_(code, timed_out=False):
    return {"exit_code": code, "timed_out": timed_out, "seconds": 0.1}


def rep(outcomes, end_exit, collect=(), forged=None):
    return {
        "forged": forged,
        "end": None if end_exit is None else {"t": "end", "exit": end_exit},
        "ends": 0 if end_exit is None else 1,
        "sessions": 1,
        "outcomes": dict(outcomes),
        "collect_errors": list(collect),
        "integrity": [],
    }


CANARIES = {"a.js::c pass": "passed", "a.js::c fail": "failed", "b.js::c pass": "passed", "b.js::c fail": "failed"}


def canaries():
    return {"path": "t/c.js", "digest": "x", "expect": dict(CANARIES)}


def test_a_clean_run_exits_0_once_its_canaries_failures_are_taken_out():
    units = [
        ("a.js", run_(1), rep({"a.js::x": "passed", "a.js::c pass": "passed", "a.js::c fail": "failed"}, 1)),
        ("b.js", run_(1), rep({"b.js::y": "passed", "b.js::c pass": "passed", "b.js::c fail": "failed"}, 1)),
    ]
    c = canaries()
    code, report = nodejs.fold(units, c, "tape")
    assert code == 0 and report["end"]["exit"] == 0
    assert report["outcomes"] == {"a.js::x": "passed", "b.js::y": "passed"}
    assert c["got"] == CANARIES


def test_a_real_failure_keeps_the_failing_status():
    units = [("a.js", run_(1), rep({"a.js::x": "failed", "a.js::c pass": "passed", "a.js::c fail": "failed"}, 1))]
    code, report = nodejs.fold(units, canaries(), "tape")
    assert code == 1 and report["end"]["exit"] == 1


def test_mocha_exits_with_its_failure_count_which_must_be_the_canaries_alone():
    two = {"a.js::x": "passed", "a.js::c fail": "failed", "a.js::c2 fail": "failed"}
    c = {"path": "t/c.js", "digest": "x", "expect": {"a.js::c fail": "failed", "a.js::c2 fail": "failed"}}
    assert nodejs.fold([("a.js", run_(2), rep(two, 2))], c, "mocha", by_count=True)[0] == 0
    c = {"path": "t/c.js", "digest": "x", "expect": {"a.js::c fail": "failed", "a.js::c2 fail": "failed"}}
    assert nodejs.fold([("a.js", run_(3), rep(two, 3))], c, "mocha", by_count=True)[0] == 1


def test_a_file_that_crashed_counts_its_tests_failed_never_passed():
    before = {"a.js::ran first": "passed", "a.js::crashed": "failed", "a.js::c pass": "passed"}
    units = [
        ("a.js", run_(1), rep(before, 1, collect=["a.js"])),  # the preload named the crash
        ("b.js", run_(0), rep({"b.js::y": "passed"}, 0)),
    ]
    code, report = nodejs.fold(units, canaries(), "tape")
    assert report["outcomes"]["a.js::ran first"] == "failed"
    assert report["outcomes"]["b.js::y"] == "passed"
    assert code == 1 and report["collect_errors"] == ["a.js"] and not report["forged"]


def test_a_process_that_died_before_its_last_word_loses_its_tests_not_the_others():
    units = [
        ("a.js", run_(7), rep({"a.js::x": "passed"}, None)),  # node:test's load failure, status 7
        ("b.js", run_(0), rep({"b.js::y": "passed"}, 0)),
    ]
    code, report = nodejs.fold(units, None, "node:test")
    assert report["outcomes"] == {"a.js::x": "failed", "b.js::y": "passed"}
    assert report["end"] == {"t": "end", "exit": 1} and code == 1
    assert report["collect_errors"] == ["a.js"] and not report["forged"]


def test_a_process_that_exited_0_before_its_last_word_is_forgery():
    units = [("a.js", run_(0), rep({"a.js::x": "passed"}, None))]
    _, report = nodejs.fold(units, None, "tape")
    assert "before tape reported its end" in report["forged"]


def test_a_status_that_contradicts_the_reporters_last_word_is_named():
    units = [("a.js", run_(0), rep({"a.js::x": "failed"}, 1))]
    _, report = nodejs.fold(units, None, "tape")
    assert any("exit status 1 but its process exited with 0" in w for w in report["integrity"])


def test_canaries_outcomes_are_left_as_they_were_for_the_host_to_judge():
    flipped = {"a.js::x": "passed", "a.js::c pass": "passed", "a.js::c fail": "passed"}
    c = {"path": "t/c.js", "digest": "x", "expect": {"a.js::c pass": "passed", "a.js::c fail": "failed"}}
    code, report = nodejs.fold([("a.js", run_(0), rep(flipped, 0))], c, "tape")
    assert c["got"] == {"a.js::c pass": "passed", "a.js::c fail": "passed"} and code == 0
    assert "a.js::c fail" not in report["outcomes"]


# --- the run's own files ---------------------------------------------------------------------


AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="making files root's needs root (the grading container's supervisor is)"
)
USER = (4321, 4321)  # the submission's user in these tests: not root, owns the repository


def armed(tmp_path: Path, files: dict[str, str]) -> nodejs.node_guard.Guard:
    """A repository of the user's (node_modules/ too, as an image made before the guard
    had it), armed as a run arms it."""
    make_tree(tmp_path, files)
    for dirpath, dirs, names in os.walk(tmp_path):
        for n in [*dirs, *names, None]:
            os.lchown(dirpath if n is None else os.path.join(dirpath, n), *USER)
    j = order(tmp_path, tap.plan({"paths": ["test/a.js"]}, {}))
    j.uid, j.gid = USER
    return nodejs.guard(j)


def changed(g: nodejs.node_guard.Guard) -> list[str]:
    return [b.split(" (", 1)[0] for b in g.breaches()]


def as_user(path: Path) -> None:
    os.lchown(path, *USER)


@AS_ROOT
def test_the_guard_makes_node_modules_and_the_configuration_roots_and_honest_work_is_no_change(tmp_path):
    g = armed(
        tmp_path,
        {
            "package.json": "{}",
            "node_modules/tape/index.js": "x",
            "node_modules/tape/node_modules/dep/a.js": "d",
            "fixtures/p/node_modules/dep/a.js": "f",  # a fixture's, checked in with the tests
            "lib/a.js": "a",
            "test/a.js": "t",
        },
    )
    try:
        assert sorted(g.held) == ["fixtures/p/node_modules", "node_modules", "package.json"]
        assert not (tmp_path / "fixtures/p/node_modules/.cache").exists()  # made at the top only
        for rel in ("node_modules", "node_modules/tape/index.js", "node_modules/tape/node_modules/dep", "package.json"):
            st = (tmp_path / rel).lstat()
            assert st.st_uid == 0 and not st.st_mode & 0o022, rel
        assert (tmp_path / "package.json").stat().st_mode & 0o777 == 0o444
        cache = tmp_path / "node_modules/.cache"
        assert (cache.stat().st_uid, cache.stat().st_gid) == USER
        # honest: a tool's cache, the library, a file of the tests' own beside the repository's
        (cache / "babel").mkdir()
        (cache / "babel/x.json").write_text("{}")
        (tmp_path / "lib/a.js").write_text("changed")
        (tmp_path / "coverage.json").write_text("{}")
        # and the sandbox's own stamps on files of the tree (gVisor writing an atime back
        # moves the host's change time on): no file of a node_modules/ is compared by stamp
        os.utime(tmp_path / "node_modules/tape/index.js", ns=(1, 1))
        assert changed(g) == []
    finally:
        g.close()


@AS_ROOT
def test_a_configuration_file_moved_away_and_back_or_replaced_by_the_users_is_a_change(tmp_path):
    g = armed(tmp_path, {"package.json": "{}", "lib/.babelrc": "{}", "test/a.js": "t", "node_modules/x/i.js": "x"})
    try:
        pj = tmp_path / "package.json"
        st = pj.stat()
        # attack 1: moved aside and back in the user's directory, bytes and times untouched
        os.rename(pj, tmp_path / "aside.json")
        os.rename(tmp_path / "aside.json", pj)
        assert pj.stat().st_mtime_ns == st.st_mtime_ns
        # attack 2: replaced by a file of the user's with the same bytes and times
        rc = tmp_path / "lib/.babelrc"
        rc_st = rc.stat()
        rc.unlink()
        rc.write_text("{}")
        as_user(rc)
        os.utime(rc, ns=(rc_st.st_atime_ns, rc_st.st_mtime_ns))
        # attack 3: a configuration file that was not there (babel reads it for the next unit)
        (tmp_path / "test/.babelrc").write_text("{}")
        assert g.breaches() == [
            "lib/.babelrc (replaced)",
            "package.json (changed, or moved away and back)",
            "test/.babelrc (appeared)",
        ]
    finally:
        g.close()


@AS_ROOT
def test_a_node_modules_swapped_added_to_or_appearing_is_a_change(tmp_path):
    g = armed(tmp_path, {"package.json": "{}", "test/a.js": "t", "node_modules/chai/index.js": "x"})
    try:
        # attack 1: the packages moved aside, a copy of the user's put in their place
        os.rename(tmp_path / "node_modules", tmp_path / "nm")
        (tmp_path / "node_modules/chai").mkdir(parents=True)
        (tmp_path / "node_modules/chai/index.js").write_text("x")
        as_user(tmp_path / "node_modules")
        assert g.breaches() == ["node_modules (replaced)"]
        # ... and put back, the next unit having loaded the copy: the held directory's change
        # time moved on
        shutil.rmtree(tmp_path / "node_modules")
        os.rename(tmp_path / "nm", tmp_path / "node_modules")
        assert g.breaches() == ["node_modules (changed, or moved away and back)"]
    finally:
        g.close()
    g = armed(tmp_path / "b", {"package.json": "{}", "test/a.js": "t", "node_modules/chai/index.js": "x"})
    try:
        # attack 2: a package added beside the installed ones (as root here; the user cannot)
        (tmp_path / "b/node_modules/tape").mkdir()
        # attack 3: a node_modules/ of the user's where node looks first for the library's imports
        (tmp_path / "b/lib/node_modules/chai").mkdir(parents=True)
        assert g.breaches() == ["lib/node_modules (appeared)", "node_modules (entries added or removed: tape)"]
    finally:
        g.close()


PATTERN = ({"package.json", ".babelrc"}, ("jest.config.",), (".babelrc.js",))


def settled(tmp_path: Path, files: dict[str, str]) -> nodejs.node_guard.Scanner:
    """A tree whose directories were last changed well before the scanner's margin, and a
    first look at it."""
    make_tree(tmp_path, files)
    scanner = nodejs.node_guard.Scanner(str(tmp_path), PATTERN)
    scanner.margin_ns = 20_000_000
    time.sleep(0.05)  # past the margin: every stamp is now one the next look may trust
    scanner.look()
    return scanner


def test_the_kept_scan_finds_what_a_full_walk_finds(tmp_path):
    make_tree(
        tmp_path,
        {
            "package.json": "{}",
            "node_modules/a/index.js": "",
            "lib/node_modules/b/index.js": "",
            "lib/deep/er/.babelrc": "{}",
            "lib/deep/er/x.babelrc.js": "",
            "test/jest.config.js": "",
            ".git/package.json": "{}",  # .git/ at the top is never walked
            "sub/.git/package.json": "{}",  # a fixture's .git/ is
        },
    )
    (tmp_path / "linked").symlink_to(tmp_path / "lib")  # not followed
    (tmp_path / "test/node_modules").symlink_to(tmp_path / "node_modules")  # a link is a node_modules/ too
    (tmp_path / "lib/package.json").symlink_to(tmp_path / "gone")  # a dangling one is a file
    want = (
        ["lib/node_modules", "node_modules", "test/node_modules"],
        [
            "lib/deep/er/.babelrc",
            "lib/deep/er/x.babelrc.js",
            "lib/package.json",
            "package.json",
            "sub/.git/package.json",
            "test/jest.config.js",
        ],
    )
    walked: tuple[list[str], list[str]] = ([], [])
    for root, subdirs, names in os.walk(tmp_path):
        rel = os.path.relpath(root, tmp_path)
        rel = "" if rel == "." else rel + "/"
        if not rel:
            subdirs.remove(".git")
        walked[0].extend(rel + s for s in subdirs if s == "node_modules")
        subdirs[:] = [s for s in subdirs if s != "node_modules"]
        walked[1].extend(
            rel + n
            for n in names
            if n == "package.json" or n.endswith("babelrc") or n.endswith(".babelrc.js") or n.startswith("jest.config.")
        )
    assert (sorted(walked[0]), sorted(walked[1])) == want
    scanner = nodejs.node_guard.Scanner(str(tmp_path), PATTERN)
    assert scanner.look() == want == nodejs.node_guard.scan(str(tmp_path), *PATTERN)
    assert scanner.look() == want  # again, from what it kept


def test_a_look_lists_again_only_the_directories_whose_stamp_moved_and_honest_writes_add_nothing(tmp_path):
    scanner = settled(tmp_path, {"package.json": "{}", "lib/a/b/x.js": "", "test/a.js": "", "docs/r.md": ""})
    before = scanner.listed
    assert scanner.look() == ([], ["package.json"]) and scanner.listed == before  # nothing moved: no listing
    (tmp_path / "lib/a/b/y.js").write_text("the tests' own file")  # honest: a file that is no configuration
    assert scanner.look() == ([], ["package.json"]) and scanner.listed == before + 1  # lib/a/b alone


def test_a_configuration_or_node_modules_made_in_a_directory_the_last_look_kept_is_found(tmp_path):
    scanner = settled(tmp_path, {"package.json": "{}", "lib/a/b/x.js": "", "src/y.js": "", "test/a.js": ""})
    # attack 1: a package.json deep in a directory whose parents do not change
    (tmp_path / "lib/a/b/package.json").write_text('{"type": "module"}')
    # attack 2: ... and its directory's modification time put back as it was
    st = (tmp_path / "src").stat()
    (tmp_path / "src/node_modules/chai").mkdir(parents=True)
    os.utime(tmp_path / "src", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert scanner.look() == (["src/node_modules"], ["lib/a/b/package.json", "package.json"])
    # attack 3: a kept directory moved away and one of the same name put in its place
    time.sleep(0.05)
    scanner.look()
    os.rename(tmp_path / "lib/a", tmp_path / "lib/aside")
    (tmp_path / "lib/a/b").mkdir(parents=True)
    (tmp_path / "lib/a/b/.babelrc").write_text("{}")
    shutil.rmtree(tmp_path / "lib/aside")
    assert scanner.look() == (["src/node_modules"], ["lib/a/b/.babelrc", "package.json"])


def test_a_link_whose_target_changes_outside_the_repository_is_found_though_its_directory_stays(tmp_path):
    outside = tmp_path / "tmp"  # a directory the user may write that is not the repository (/tmp)
    outside.mkdir()
    repo = tmp_path / "repo"
    make_tree(repo, {"package.json": "{}", "lib/a.js": "", "src/b.js": "", "docs/r.md": ""})
    # what a patch may add: links, dangling when the run starts
    (repo / "lib/node_modules").symlink_to(outside / "evil")
    (repo / "src/package.json").symlink_to(outside / "pj")
    (outside / "pj").mkdir()  # a directory now: no configuration file
    (repo / "docs/other").symlink_to(repo / "lib")  # honest: a link of no such name
    scanner = nodejs.node_guard.Scanner(str(repo), PATTERN)
    scanner.margin_ns = 20_000_000
    time.sleep(0.05)
    assert scanner.look() == ([], ["lib/node_modules", "package.json"])
    before = scanner.listed
    # attack 1: the link's target made a directory of packages (node resolves through it)
    (outside / "evil/chai").mkdir(parents=True)
    # attack 2: the configuration link's target made a file
    (outside / "pj").rmdir()
    (outside / "pj").write_text('{"type": "module"}')
    assert scanner.look() == (["lib/node_modules"], ["package.json", "src/package.json"])
    assert scanner.listed == before + 2  # lib and src, never docs: its link names nothing the guard looks for


def test_placed_hidden_files_moved_aside_and_back_are_seen_and_an_earlier_stamp_is_not(tmp_path):
    from grader.box.hidden import moved, placed_identity
    from grader.box.tree import Tree

    make_tree(tmp_path, {"test/hidden.js": "h", "test/other.js": "o"})
    tree = Tree(str(tmp_path), os.getuid(), os.getgid())
    identity = placed_identity(tree, {"test/hidden.js": "d", "test/other.js": "d"}, None)
    os.rename(tmp_path / "test/hidden.js", tmp_path / "test/x.js")
    os.rename(tmp_path / "test/x.js", tmp_path / "test/hidden.js")
    assert moved(tree, identity) == ["test/hidden.js"]
    (tmp_path / "test/other.js").unlink()
    assert moved(tree, identity) == ["test/hidden.js", "test/other.js"]
    # honest: the stamp kept before was the sandbox's own, a little later than the host's
    # that a new lookup reports now
    now = placed_identity(tree, {"test/hidden.js": "d"}, None)
    assert moved(tree, {rel: (ctime + 1_000_000,) for rel, (ctime,) in now.items()}) == []


def test_the_placed_files_are_held_open_for_the_run_whatever_the_runner(tmp_path):
    """gVisor keeps a file's times while its dentry is cached; a lookup after the dentry fell
    out (jest's haste map, a Go build) reads the host's, later for a file the sandbox wrote, and
    `moved` would then see an untouched hidden test as moved. Every placed file, the hidden
    tests' and the canaries', is held open from the moment its identity is recorded."""
    from grader.box import hidden
    from grader.box.tree import Tree

    make_tree(tmp_path, {"test/hidden.js": "h", "test/canary.js": "c", "lib/x.js": ""})
    tree = Tree(str(tmp_path), os.getuid(), os.getgid())
    canaries = {"files": {"test/canary.js": "d"}}
    before = len(hidden._PINNED)
    try:
        hidden.placed_identity(tree, {"test/hidden.js": "d", "test/gone.js": None}, canaries)
        held = {os.readlink(f"/proc/self/fd/{fd}") for fd in hidden._PINNED[before:]}
        assert held == {str(tmp_path / "test/hidden.js"), str(tmp_path / "test/canary.js")}
    finally:
        for fd in hidden._PINNED[before:]:
            os.close(fd)
        del hidden._PINNED[before:]


def test_sealing_makes_the_tasks_test_code_roots_and_read_only(tmp_path):
    tree = make_tree(
        tmp_path, {"test/a.js": "t", "test/helpers.js": "h", "test/sub/fixture.json": "{}", "lib/x.js": ""}
    )
    os.symlink("/etc/passwd", tmp_path / "test" / "link")
    for p in tmp_path.rglob("*"):
        if not p.is_symlink():
            os.chown(p, 1000, 1000)
    spec = tap.plan({"paths": ["test/a.js"]}, {})
    spec.trusted_tests = ["test/", "test/a.js"]
    j = order(tmp_path, spec)
    (tmp_path / ".hidden").mkdir()
    nodejs.seal(j, tree, [])
    for rel in ("test/a.js", "test/helpers.js", "test/sub/fixture.json"):
        st = (tmp_path / rel).stat()
        assert st.st_uid == 0 and not st.st_mode & 0o222, rel
    assert (tmp_path / "lib/x.js").stat().st_uid == 1000
    assert (tmp_path / "test").stat().st_uid == 0  # the test file's directory, locked
    assert (tmp_path / "test" / "link").is_symlink()  # a link is neither followed nor changed


# --- ids as other benchmarks write them (grader/checks/ids.py, judged in checks/tests.py) -----

REPORTED = {
    "test/a.test.js::mean > empty throws": "passed",
    "test/a.test.js::mean > two": "failed",
    "test/a.test.js::mean > two values": "passed",
    "test/a.test.js::works": "passed",
    "test/b.test.js::parse > works": "failed",
    "test/b.test.js::parse > strict > works": "passed",
    "test/b.test.js::dup": "passed",
    "test/b.test.js::dup [2]": "failed",
    "test/c.test.js::only": "passed",
}


def judged(f2p: list[str], p2p: list[str] | None = None, outcomes: dict[str, str] | None = None):
    from grader.checks.tests import evaluate_tests

    return evaluate_tests(
        outcomes=dict(REPORTED if outcomes is None else outcomes),
        report_problem=None,
        exit_code=1,
        fail_to_pass=f2p,
        pass_to_pass=p2p or [],
        runner="jest",
        exits=None,
        title_ids=True,
    )


@pytest.mark.parametrize(
    "listed",
    [
        "test/a.test.js::mean > empty throws",  # ours
        "mean > empty throws",  # the title path without the file
        "mean › empty throws",  # jest's
        "mean empty throws",  # jest's fullName
        "mean - empty throws",
        "mean:empty throws",
        "empty throws",  # the bare title
        "test/a.test.js > mean > empty throws",  # vitest's verbose line
        "./test/a.test.js::mean > empty throws",
    ],
)
def test_a_listed_id_in_another_benchmarks_spelling_names_its_test(listed):
    from grader.checks.ids import resolve

    got, named = resolve([listed], REPORTED)
    assert got == {listed: "passed"}
    if listed != "test/a.test.js::mean > empty throws":
        assert named == {listed: ["test/a.test.js::mean > empty throws"]}
    outcome = judged([listed])
    assert outcome.passed and outcome.tests.fail_to_pass == {"success": [listed], "failure": []}


def test_an_ambiguous_bare_title_needs_every_test_it_names_to_pass():
    from grader.checks.ids import resolve

    got, named = resolve(["works"], REPORTED)
    assert named["works"] == [
        "test/a.test.js::works",
        "test/b.test.js::parse > strict > works",
        "test/b.test.js::parse > works",
    ]
    assert got == {"works": "failed"}
    outcome = judged(["works"])
    assert not outcome.passed and outcome.tests.fail_to_pass["failure"] == ["works"]
    assert "works" in outcome.explanation and "not run" not in outcome.explanation


def test_a_file_alone_needs_all_its_tests_and_one_failure_fails_it():
    assert not judged(["test/a.test.js"]).passed  # `mean > two` failed
    outcome = judged(["test/c.test.js"])
    assert outcome.passed and outcome.tests.fail_to_pass["success"] == ["test/c.test.js"]


def test_an_id_that_looks_like_a_prefix_of_another_names_only_itself():
    from grader.checks.ids import resolve

    got, named = resolve(["mean > two", "mean two"], REPORTED)
    assert named == {"mean > two": ["test/a.test.js::mean > two"], "mean two": ["test/a.test.js::mean > two"]}
    assert got == {"mean > two": "failed", "mean two": "failed"}
    # and the longer one is not a prefix match of the shorter
    assert resolve(["mean > two values"], REPORTED)[0] == {"mean > two values": "passed"}
    assert resolve(["mean > tw", "test/a.test", "test/a.test.js::mean"], REPORTED) == ({}, {})


def test_a_repeated_name_is_one_name_unless_the_run_s_own_id_is_listed():
    from grader.checks.ids import resolve

    assert resolve(["dup"], REPORTED)[0] == {"dup": "failed"}  # both must pass
    assert resolve(["test/b.test.js::dup"], REPORTED)[0] == {"test/b.test.js::dup": "passed"}


def test_an_id_that_names_nothing_was_not_run_and_is_named_as_listed():
    outcome = judged(["mean › empty throws", "no such test"], ["test/gone.test.js"])
    assert not outcome.passed
    assert outcome.tests.fail_to_pass == {"success": ["mean › empty throws"], "failure": ["no such test"]}
    assert outcome.tests.pass_to_pass["failure"] == ["test/gone.test.js"]
    assert "no such test" in outcome.explanation and "test/gone.test.js" in outcome.explanation
    assert "(2 not run)" in outcome.explanation
    assert outcome.details["ids"] == {"mean › empty throws": ["test/a.test.js::mean > empty throws"]}


def test_other_runners_keep_exact_ids():
    from grader.checks.tests import evaluate_tests

    outcome = evaluate_tests(
        outcomes={"tests/test_a.py::test_x": "passed"},
        report_problem=None,
        exit_code=0,
        fail_to_pass=["test_x"],
        pass_to_pass=[],
        runner="pytest",
    )
    assert not outcome.passed


def test_file_ids_are_run_and_protected_with_the_hidden_tests():
    assert nodejs.listed_files(["test/a.test.js", "./test/b.spec.ts::x", "works", "a > b.js"]) == [
        "test/a.test.js",
        "test/b.spec.ts",
    ]
    spec = jest.plan({"fail_to_pass": ["test/a.test.js", "mean › two"]}, {"test/h.test.js": "d"})
    assert spec.paths == ["test/a.test.js", "test/h.test.js"]
    for module in RUNNERS.values():
        assert module.ID_STYLE == "title-path"


# --- jest with the repository's own configuration ----------------------------------------------

SHOWN = {
    "configs": [
        {
            "automock": False,
            "cache": True,
            "cacheDirectory": "/tmp/jest_0",
            "cwd": "/work/repo",
            "id": "786d",
            "moduleNameMapper": [["\\.css$", "/work/repo/support/style.js"], ["^@/(.*)$", "/work/repo/src/$1"]],
            "rootDir": "/work/repo",
            "roots": ["/work/repo"],
            "runner": "/work/repo/node_modules/jest-runner/build/index.js",
            "setupFiles": ["/work/repo/support/setup.js"],
            "setupFilesAfterEnv": ["/work/repo/jest.setup.ts"],
            "globalSetup": "/work/repo/support/global.js",
            "testEnvironment": "/work/repo/node_modules/jest-environment-jsdom/build/index.js",
            "testMatch": ["**/?(*.)+(spec|test).[tj]s?(x)"],
            "testRegex": [],
            "transform": [
                ["^.+\\.tsx?$", "/work/repo/node_modules/ts-jest/dist/index.js", {"tsconfig": "tsconfig.test.json"}],
                ["\\.txt$", "/work/repo/support/raw.cjs"],
            ],
        }
    ],
    "globalConfig": {
        "bail": 0,
        "rootDir": "/work/repo",
        "testTimeout": 7000,
        "testFailureExitCode": 3,
        "testSequencer": "/work/repo/node_modules/@jest/test-sequencer/build/index.js",
        "reporters": [["/work/repo/node_modules/jest-junit/index.js", {}]],
        "collectCoverage": True,
    },
    "version": "29.7.0",
}


def test_the_repository_s_configuration_is_found_where_jest_finds_it(tmp_path):
    tree = make_tree(tmp_path, {"package.json": '{"name": "x"}'})
    assert jest.repository_config(tree) is None
    (tmp_path / "package.json").write_text('{"name": "x", "jest": {"testEnvironment": "jsdom"}}')
    assert jest.repository_config(tree) == "package.json"
    (tmp_path / "jest.config.ts").write_text("export default {};")
    assert jest.repository_config(tree) == "jest.config.ts"
    (tmp_path / "jest.config.js").write_text("module.exports = {};")
    assert jest.repository_config(tree) == "jest.config.js"


def test_the_configuration_is_frozen_with_what_the_grader_owns_set_over_it():
    doc = jest.shown_config("a line the config printed\n" + json.dumps(SHOWN, indent=2))
    inline = jest.frozen_config(doc, "/tmp/.grader-r")
    assert inline["reporters"] == ["default", "/tmp/.grader-r/jest-reporter.cjs"]
    assert inline["cacheDirectory"] == jest.CACHE and inline["watchman"] is False
    assert inline["testMatch"] == ["**/*"] and inline["testRegex"] == []
    assert inline["moduleNameMapper"] == {"\\.css$": "/work/repo/support/style.js", "^@/(.*)$": "/work/repo/src/$1"}
    assert inline["transform"] == {
        "^.+\\.tsx?$": ["/work/repo/node_modules/ts-jest/dist/index.js", {"tsconfig": "tsconfig.test.json"}],
        "\\.txt$": ["/work/repo/support/raw.cjs", {}],
    }
    assert inline["setupFiles"] == ["/work/repo/support/setup.js"] and inline["testTimeout"] == 7000
    # what is not an option, or is the grader's: the id, the cache, coverage, bail, the
    # failure status, the repository's reporters, jest's own sequencer
    for key in ("id", "cwd", "cache", "collectCoverage", "bail", "testFailureExitCode", "testSequencer"):
        assert key not in inline, key
    two = dict(SHOWN, configs=[SHOWN["configs"][0], dict(SHOWN["configs"][0], displayName="b")])
    inline = jest.frozen_config(two, "/r")
    assert len(inline["projects"]) == 2 and "testMatch" not in inline and inline["rootDir"] == "/work/repo"
    assert inline["projects"][0]["testMatch"] == ["**/?(*.)+(spec|test).[tj]s?(x)"]
    with pytest.raises(ValueError, match="printed no configuration"):
        jest.shown_config("Error: cannot find module ts-node")


def test_a_mapper_of_the_package_s_own_name_is_the_library_not_a_stand_in():
    shown = json.loads(json.dumps(SHOWN))
    shown["configs"][0]["moduleNameMapper"] += [
        ["^@acme/stats$", "/work/repo/src/index.ts"],
        ["^@acme/stats/extra$", "/work/repo/src/extra.ts"],
        ["^@acme/statsx$", "/work/repo/support/other.ts"],
    ]
    files = jest.module_files(shown, "/work/repo", "@acme/stats")
    assert "src/index.ts" not in files and "src/extra.ts" not in files
    assert {"support/style.js", "support/other.ts"} <= set(files)
    assert "src/index.ts" in jest.module_files(shown, "/work/repo")  # no name: every file target


def test_the_files_the_configuration_names_as_modules_are_the_repository_s_own():
    assert jest.module_files(SHOWN, "/work/repo") == [
        "jest.setup.ts",
        "support/global.js",
        "support/raw.cjs",
        "support/setup.js",
        "support/style.js",
    ]


def test_before_the_patch_jest_reads_the_configuration_and_its_files_are_protected(tmp_path, monkeypatch):
    repo = "/work/repo"
    shown = json.loads(json.dumps(SHOWN).replace(repo, str(tmp_path)))
    tree = make_tree(
        tmp_path,
        {
            "package.json": "{}",
            "jest.config.js": "module.exports = {};",
            "node_modules/jest/bin/jest.js": "",
            "support/setup.js": "",
            "support/global.js": "",
            "support/raw.cjs": "",
            "jest.setup.ts": "",
            "__tests__/a.test.ts": "afterAll(() => expect(n));\n",  # the canaries get a file of their own
        },
    )
    (tmp_path / "support/style.js").mkdir()  # a directory: not a module file
    seen = {}

    class Out:
        def __init__(self, data: bytes):
            self._data = data

        def data(self) -> bytes:
            return self._data

    def fake_run(order_, argv, **kwargs):
        seen["argv"] = argv
        return {"exit_code": 0, "timed_out": False, "out": Out(json.dumps(shown).encode()), "err": Out(b"")}

    monkeypatch.setattr(nodejs, "run_as_user", fake_run)
    j = order(tmp_path, jest.plan({"paths": ["__tests__/a.test.ts"]}, {"__tests__/a.test.ts": "d"}))
    jest.before_patch(j, tree)
    assert seen["argv"][2:] == ["--showConfig", "--ci", "-i", "--watchman=false", "--config", "jest.config.js"]
    assert j.check.base_config["file"] == "jest.config.js"
    assert j.check.base_config["files"] == ["jest.setup.ts", "support/global.js", "support/raw.cjs", "support/setup.js"]
    assert set(j.check.base_config["files"]) <= set(j.protect.files)
    # a patch that edits them is taken back like the configuration itself
    p = Protection(j.protect, {f: ("f", 0o644, 1, 1) for f in j.protect.files})
    assert p.why("support/setup.js") == "hidden or listed test"
    # the canaries now take the tests' own extension and syntax
    c = jest.make_canaries(j, tree)
    assert c["path"].endswith(".test.ts") and c["kind"] == "esm"  # TypeScript: no require

    def failing(order_, argv, **kwargs):
        return {"exit_code": 1, "timed_out": False, "out": Out(b""), "err": Out(b"Cannot find module 'ts-node'")}

    monkeypatch.setattr(nodejs, "run_as_user", failing)
    with pytest.raises(ValueError, match="could not read the repository's configuration.*ts-node"):
        jest.before_patch(order(tmp_path, replace(j.check, base_config=None)), tree)


def test_without_a_configuration_jest_stays_plain(tmp_path, monkeypatch):
    tree = make_tree(tmp_path, {"package.json": '{"name": "calc"}', "__tests__/a.test.js": ""})
    monkeypatch.setattr(nodejs, "run_as_user", lambda *a, **k: pytest.fail("no configuration to read"))
    j = order(tmp_path, jest.plan({"paths": ["__tests__/a.test.js"]}, {}))
    jest.before_patch(j, tree)
    assert j.check.base_config is None
    inline = jest.config(j, "/r")
    assert inline["transform"] == {} and inline["testEnvironment"] == "node"


# --- vitest -----------------------------------------------------------------------------------

PROBE = {
    "version": "3.2.4",
    "projects": [
        {
            "name": "",
            "configFile": "/work/repo/vitest.config.ts",
            "deps": ["/work/repo/support/shared.ts", "/work/repo/vitest.config.ts"],
            "setupFiles": ["/work/repo/support/setup.ts"],
            "globalSetup": ["/work/repo/support/global.ts"],
            "environment": "node",
            "alias": ["/work/repo/src", "/work/repo/test/style.ts", "/@fs/work/repo/node_modules/vite/client.mjs"],
            "pool": "threads",
            "browser": False,
        }
    ],
}


def test_vitest_s_loaded_files_are_read_from_its_own_configuration():
    doc = vitest.probed("some output of the config\n" + json.dumps(PROBE) + "\n")
    assert vitest.loaded_files(doc, "/work/repo") == [
        "src",
        "support/global.ts",
        "support/setup.ts",
        "support/shared.ts",
        "test/style.ts",
        "vitest.config.ts",
    ]
    assert vitest.in_repo("/@fs/work/repo/a.ts?v=1", "/work/repo") == "a.ts"
    assert vitest.in_repo("/work/repo/node_modules/x/y.js", "/work/repo") is None
    with pytest.raises(ValueError, match="could not read"):
        vitest.probed("Error: failed to load config")


def test_before_the_patch_vitest_reads_its_configuration(tmp_path, monkeypatch):
    shown = json.loads(json.dumps(PROBE).replace("/work/repo", str(tmp_path)))
    tree = make_tree(
        tmp_path,
        {
            "package.json": "{}",
            "vitest.config.ts": "",
            "node_modules/vitest/vitest.mjs": "",
            "support/shared.ts": "",
            "support/setup.ts": "",
            "support/global.ts": "",
            "test/style.ts": "",
            "src/index.ts": "",
            # an afterAll: the canaries get a file of their own
            "test/a.test.ts": (
                "import { expect, test } from 'vitest';\nimport { x } from '../src/index';\n"
                "afterAll(() => expect(0));\n"
            ),
        },
    )

    class Out:
        def data(self) -> bytes:
            return (json.dumps(shown) + "\n").encode()

    monkeypatch.setattr(nodejs, "run_as_user", lambda *a, **k: {"exit_code": 0, "timed_out": False, "out": Out()})
    monkeypatch.setattr(nodejs, "reporter_dir", lambda: "/tmp/r")
    j = order(tmp_path, vitest.plan({"paths": ["test/a.test.ts"]}, {"test/a.test.ts": "d"}))
    vitest.before_patch(j, tree)
    own = j.check.base_config
    assert own["file"] == "vitest.config.ts" and own["pool"] == "forks"
    assert own["files"] == [
        "support/global.ts",
        "support/setup.ts",
        "support/shared.ts",
        "test/style.ts",
        "vitest.config.ts",
    ]
    assert "src" not in j.protect.files and "src/index.ts" not in j.protect.files  # a directory alias: the library's
    c = vitest.make_canaries(j, tree)
    source = (tmp_path / c["path"]).read_text()
    assert c["path"].startswith("test/") and c["path"].endswith(".test.ts")
    assert source.startswith("import { test, expect, beforeAll } from 'vitest';")
    assert 'for (const spec of ["../src/index"])' in source and "require(" not in source and "export {};" in source
    assert all(tid.startswith(c["path"] + "::") for tid in c["expect"])
    shown["projects"][0]["browser"] = True
    with pytest.raises(ValueError, match="browser"):
        vitest.before_patch(order(tmp_path, replace(j.check, base_config=None)), tree)


@pytest.mark.parametrize("runner", [jest, vitest], ids=["jest", "vitest"])
def test_a_configuration_the_host_gives_is_not_read_again_and_still_protects(tmp_path, monkeypatch, runner):
    """The host gives the next grades of an image what the first read at the base: no
    runner starts to read it, and the files it names are protected as if read now."""
    tree = make_tree(
        tmp_path,
        {
            "package.json": "{}",
            "jest.config.js": "",
            "node_modules/vitest/vitest.mjs": "",
            "support/setup.js": "",
            "a.test.js": "",
        },
    )
    monkeypatch.setattr(nodejs, "run_as_user", lambda *a, **k: pytest.fail("read again"))
    given = {"file": "jest.config.js", "files": ["support/setup.js"], "pool": "forks", "shown": {}}
    j = order(tmp_path, runner.plan({"paths": ["a.test.js"]}, {}))
    j.check.base_config = dict(given)
    runner.before_patch(j, tree)
    assert j.check.base_config == given
    assert "support/setup.js" in j.protect.files
    p = Protection(j.protect, {f: ("f", 0o644, 1, 1) for f in j.protect.files})
    assert p.why("support/setup.js") == "hidden or listed test"


class _Out:
    def __init__(self, doc: dict) -> None:
        self.doc = doc

    def data(self) -> bytes:
        return (json.dumps(self.doc) + "\n").encode()


@pytest.mark.parametrize(
    "version, pool, want",
    [("3.2.4", "vmThreads", "vmForks"), ("1.6.0", "vmThreads", "forks"), ("2.1.9", "threads", "forks")],
)
def test_a_vm_pool_stays_a_vm_pool_in_a_child_process(tmp_path, monkeypatch, version, pool, want):
    out = _Out({"version": version, "projects": [{"configFile": None, "pool": pool}]})
    tree = make_tree(tmp_path, {"node_modules/vitest/vitest.mjs": "", "a.test.ts": ""})
    monkeypatch.setattr(nodejs, "run_as_user", lambda *a, **k: {"exit_code": 0, "timed_out": False, "out": out})
    monkeypatch.setattr(nodejs, "reporter_dir", lambda: "/tmp/r")
    j = order(tmp_path, vitest.plan({"paths": ["a.test.ts"]}, {}))
    vitest.before_patch(j, tree)
    assert j.check.base_config["pool"] == want
    assert j.check.base_config["file"] is None


def test_transformed_canaries_need_no_node_module_and_no_types():
    for seed in range(20):
        source = nodejs.transformed_source(
            "jest", ["../calc"], [("a b", True, None), ("c d", False, None)], random.Random(seed)
        )
        assert "require(" not in source and "createHash" not in source and ": " not in source.split("test(")[0]
        assert source.count("\ntest(") == 2 and "export {};" in source
        assert nodejs.esm_syntax("import x from 'y';\n") and not nodejs.esm_syntax("const x = require('y');\n")


def test_type_only_imports_are_not_borrowed(tmp_path):
    tree = make_tree(
        tmp_path,
        {
            "t/a.test.ts": (
                "import type { X } from '../types';\nimport { y } from '../y';\nexport type { Z } from '../z';\n"
            )
        },
    )
    spec = vitest.plan({"paths": ["t/a.test.ts"]}, {"t/a.test.ts": "d"})
    assert nodejs.borrowed(spec, tree) == ["../y"]


# --- canaries through the hidden tests' own assertion forms (node_forms.py) -------------------

FORMS_JEST = """\
import { parse } from '../src/parse';
describe('parse', () => {
  test('empty', () => {
    expect(() => parse('')).toThrow(/empty input/);
    expect(() => parse(')(')).toThrowError(SyntaxError);
    expect(parse('(a, b)')).toEqual(["a", "b"]);
    expect(parse('x').name).toBe('x');
    expect(parse('y')).not.toBeNull();
    expect(parse('z').items).toHaveLength(3);
    expect(parse('w').text).toMatch(/^w/);
    expect(() => parse(globalThis.BAD)).toThrow(messages.bad);
  });
  test('async', async () => {
    await expect(load('nope')).rejects.toThrow('missing');
  });
});
"""


def test_the_hidden_tests_assertion_forms_are_read_with_their_literal_arguments():
    from grader.box.runners import node_forms as nf

    found = nf.forms(FORMS_JEST, "expect")
    assert nf.Form("expect", "toThrow", (), "/empty input/") in found
    assert nf.Form("expect", "toThrowError", (), "SyntaxError") in found
    assert nf.Form("expect", "toBe", (), "'x'") in found
    assert nf.Form("expect", "toBeNull", ("not",), None) in found
    assert nf.Form("expect", "toHaveLength", (), "3") in found
    assert nf.Form("expect", "toThrow", ("rejects",), "'missing'") in found
    # an argument that is not a literal: said to be unknown, never copied
    assert nf.Form("expect", "toThrow", (), None, True) in found
    assert nf.Form("expect", "toEqual", (), None, True) in found
    node = "assert.throws(() => f(), /bad/);\nassert.strictEqual(f(1), 2);\nassert(ok);\nassert.strict.equal(a, b);\n"
    assert nf.forms(node, "assert") == [
        nf.Form("assert", "throws", (), "/bad/"),
        nf.Form("assert", "strictEqual", (), "2"),
        nf.Form("assert", "ok", (), None),
        nf.Form("assert", "equal", (), None, True),
    ]
    tape_src = "t.throws(function () { f('a)b'); }, TypeError);\nt.deepEqual(f([1, 2]), [1, 2]);\nt.notOk(x);\n"
    assert nf.forms(tape_src, "tape") == [
        nf.Form("tape", "throws", (), "TypeError"),
        nf.Form("tape", "deepEqual", (), None, True),
        nf.Form("tape", "notOk", (), None),
    ]


@pytest.mark.parametrize("seed", range(10))
def test_a_must_fail_canary_fails_through_each_form_of_the_hidden_tests(seed):
    from grader.box.runners import node_forms as nf

    lines = nf.failing_checks(FORMS_JEST, "vitest", random.Random(seed))
    text = "".join(lines)
    # the same matcher with the same literal, given something it cannot accept
    assert '  expect(() => JSON.parse("[0]")).toThrow(/empty input/);\n' in lines
    assert '  expect(() => JSON.parse("[0]")).toThrowError(SyntaxError);\n' in lines
    assert "  expect(null).not.toBeNull();\n" in lines
    assert "  expect(new Array(4).fill(0)).toHaveLength(3);\n" in lines
    assert "  await expect(Promise.resolve(0)).rejects.toThrow('missing');\n" in lines
    assert re.search(r"  expect\('x' \+ \"[0-9a-f]{10}\"\)\.toBe\('x'\);\n", text)
    m = re.search(r'  expect\("(q[0-9a-f]{10})"\)\.toMatch\(/\^w/\);\n', text)
    assert m and not re.search("^w", m.group(1))
    # an argument the text does not say: one canary for each kind it commonly takes
    for stand_in in (r"toThrow\(\)", r"toThrow\(/[0-9a-f]{10}/\)", r'toThrow\("[0-9a-f]{10}"\)', r"toThrow\(Error\)"):
        assert re.search(r"expect\(\(\) => JSON\.parse\(\"\[0\]\"\)\)\." + stand_in, text), stand_in
    assert len(lines) <= nf.MAX_FORMS
    # nothing of the hidden text beyond its literals
    assert "messages" not in text and "parse(" not in text.replace("JSON.parse(", "")


def test_a_canary_that_awaits_is_an_async_test():
    source = nodejs.transformed_source(
        "vitest", [], [("a b", False, "  await expect(Promise.resolve(0)).rejects.toThrow();\n")], random.Random(1)
    )
    assert 'test("a b", async () => {' in source
    source = nodejs.canary_source(
        "mocha", "cjs", [], [("c d", False, "  await assert.rejects(Promise.resolve(0));\n")], random.Random(1)
    )
    assert 'it("c d", async function () {' in source


def test_the_canaries_fail_through_a_value_and_a_throw_and_each_form(tmp_path):
    hidden = (
        "const { mean } = require('../calc');\ntest('t', (t) => { t.throws(() => mean([]), /empty/); t.end(); });\n"
    )
    tree = make_tree(tmp_path, {"package.json": "{}", "test/mean.js": hidden})
    spec = tap.plan({"paths": ["test/mean.js"]}, {"test/mean.js": "d"})
    for _ in range(10):
        c = tap.make_canaries(order(tmp_path, spec), tree)
        must_fail = [extra for _, must_pass, extra in c["tests"] if not must_pass]
        assert nodejs.THROWS_SHAPE in must_fail
        assert any(isinstance(e, int) and e != nodejs.THROWS_SHAPE for e in must_fail)
        assert '  t.throws(() => JSON.parse("[0]"), /empty/);\n' in must_fail
        assert '  t.throws(() => JSON.parse("[0]"), /empty/);\n' in (tmp_path / c["path"]).read_text()
