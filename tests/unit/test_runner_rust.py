"""The cargo runner without Docker: its plan on the host (arguments, targets, ids, canaries),
the protected paths, libtest's framing read strictly (grader/box/libtest.py), the canary
target it writes, the report it builds, the suite's manifest and locks, and the static
audit's Rust rules on the attacks (tests/helpers/rust_mini.py) and the suite's gold patches."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from grader.audit_rules import rust as rust_rules
from grader.box import libtest
from grader.box.order import CheckSpec, Order, ProtectSpec
from grader.box.protect import Protection
from grader.box.runners import cargo, runner
from grader.box.runners import test_runners as registered_test_runners
from grader.grading.spec import APPLY_CHAIN, CONTAINER_ENV
from grader.tasks.model import Task
from helpers import rust_mini as rm

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "crates-real"


# --- the runner's face -------------------------------------------------------------------------


def test_the_runner_is_registered_and_takes_no_command():
    assert "cargo" in registered_test_runners() and runner("cargo") is cargo
    assert cargo.TESTS is True and cargo.COMMAND == "none"
    assert (cargo.EXIT_PASSED, cargo.EXIT_FAILED) == (0, 1)
    assert set(cargo.EXIT_MEANING) == {cargo.EXIT_BUILD, cargo.EXIT_NOTHING}


def test_the_public_view_says_what_decides_and_what_it_cannot_catch():
    task = Task.model_validate(
        {
            "id": "t",
            "instruction": "x",
            "repo": {"path": "/nonexistent", "commit": "0" * 40},
            "environment": "rust-1.85",
            "check": {"type": "tests", "runner": "cargo", "hidden_tests": {"tests/a.rs": "a.rs"}},
        }
    )
    decided = task.public_view()["decided_by"]
    assert decided == cargo.DECIDED_BY
    assert "libtest's own output" in decided and "strictly" in decided
    assert "Not detected" in decided and "consistent stream for its own binary and exits 0" in decided


# --- plan ------------------------------------------------------------------------------------------


def plan(**check: Any) -> CheckSpec:
    hidden = check.pop("hidden", {"tests/mean.rs": "d"})
    return cargo.plan(check, hidden)


def test_the_targets_default_to_the_hidden_tests():
    spec = plan(fail_to_pass=["mean::empty"], pass_to_pass=["mean::two"])
    assert spec.kind == "cargo" and spec.args == ["--test", "mean"]
    assert spec.canaries and spec.canary_dir == "tests" and spec.canary_sources == ["tests/mean.rs"]
    assert spec.canary_words == ["empty", "two"]


def test_hidden_files_of_every_target_kind():
    hidden = {
        "tests/parse.rs": "d",
        "tests/cli/main.rs": "d",
        "tests/cli/helpers.rs": "d",  # a module of the cli target, no target of its own
        "tests/data/input.txt": "d",
        "src/tests.rs": "d",  # a unit test module: the lib's test binary
        "src/bin/tool.rs": "d",
        "tests/gone.rs": None,  # deleted by the test patch
    }
    spec = plan(hidden=hidden)
    assert spec.args == ["--bin", "tool", "--lib", "--test", "cli", "--test", "parse"]
    assert spec.canary_sources == ["tests/parse.rs"]  # one-file targets only


def test_paths_name_the_targets_and_task_args_keep_their_own_selection():
    assert plan(paths=["src/lib.rs", "tests/basic.rs", "tests/mean.rs"]).args == [
        "--lib",
        "--test",
        "basic",
        "--test",
        "mean",
    ]
    assert plan(args=["--all-features"]).args == ["--all-features", "--test", "mean"]
    assert plan(args=["--features=a,b", "-F", "c"]).args == ["--features", "a,b", "--features", "c", "--test", "mean"]
    # a task that selects targets itself gets exactly them
    assert plan(args=["--tests"]).args == ["--tests"]
    assert plan(args=["--test", "other"]).args == ["--test", "other"]
    assert plan(hidden={}).args == []  # cargo test's own default set


@pytest.mark.parametrize(
    "args",
    [
        ["--release"],
        ["--", "--nocapture"],
        ["-Z", "unstable-options"],
        ["--config", "build.rustflags=['--cfg', 'x']"],
        ["--manifest-path", "other/Cargo.toml"],
        ["--target-dir", "/tmp/t"],
        ["--message-format", "human"],
        ["--doc"],
        ["--features"],
        ["--test", "--lib"],
        [3],
    ],
)
def test_arguments_that_change_what_is_built_or_read_are_refused(args):
    with pytest.raises(ValueError):
        plan(args=args)


@pytest.mark.parametrize("path", ["README.md", "tests/data/x.txt", "build.rs", "tests/a/b/c.rs", 7])
def test_paths_that_are_no_test_target_are_refused(path):
    with pytest.raises(ValueError):
        plan(paths=[path])


def test_listed_ids_name_no_file():
    assert cargo.listed_files(["tests::one", "mean::empty", "tests/mean.rs::x"]) == []


@pytest.mark.parametrize(
    "rel, selector",
    [
        ("tests/a.rs", ["--test", "a"]),
        ("tests/a/main.rs", ["--test", "a"]),
        ("tests/a/mod.rs", None),
        ("benches/b.rs", ["--bench", "b"]),
        ("examples/e/main.rs", ["--example", "e"]),
        ("src/lib.rs", ["--lib"]),
        ("src/a/b.rs", ["--lib"]),
        ("src/bin/t.rs", ["--bin", "t"]),
        ("src/data.json", None),
        ("lib.rs", None),
    ],
)
def test_the_target_of_a_file(rel, selector):
    assert cargo.target_of(rel) == selector


# --- what is protected --------------------------------------------------------------------------------


def protection(args: list[str], manifest: str = "", tests: bool = True, hidden=("tests/mean.rs",)) -> Protection:
    spec = ProtectSpec(
        files=list(hidden),
        names=cargo.PROTECT["names"],
        suffixes=cargo.PROTECT["suffixes"],
        prefixes=cargo.PROTECT["prefixes"],
        dir_suffixes=cargo.PROTECT["dir_suffixes"],
        tests=tests,
        test_modules=cargo.PROTECT["test_modules"],
        test_dir_names=cargo.PROTECT["test_dir_names"],
        globs=cargo.protect_globs(args, manifest) if tests else [],
    )
    base = {rel: ("f", 0o644, 1, 0) for rel in ["src/lib.rs", "tests/basic.rs", "tests/mean.rs", "Cargo.toml"]}
    return Protection(spec, base)


def test_what_cargo_and_rustc_load_by_themselves_is_protected():
    p = protection(["--test", "mean"])
    for rel in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "sub/crate/Cargo.toml",
        "sub/crate/build.rs",
        ".cargo/config.toml",
        ".cargo/config",
        "rust-toolchain",
        "rust-toolchain.toml",
        "tests/mean.rs",
        "tests/basic.rs",
        "tests/new.rs",
        "tests/common/mod.rs",
        "tests/data/input.txt",
    ]:
        assert p.why(rel) is not None, rel
    for rel in ["src/lib.rs", "src/tests.rs", "src/bin/tool.rs", "README.md", "examples/e.rs", "benches/b.rs"]:
        assert p.why(rel) is None, rel


def test_benches_and_examples_are_protected_where_the_run_builds_them():
    manifest = (
        '[package]\nname = "x"\n\n[[test]]\nname = "it"\npath = "integration/it.rs"\n\n'
        '[[example]]\nname = "e"\npath = "ex/e.rs"\n'
    )
    assert cargo.manifest_targets(manifest) == [("test", "integration/it.rs"), ("example", "ex/e.rs")]
    selected = protection(["--test", "it"], manifest)
    assert selected.why("integration/it.rs") is not None
    assert selected.why("examples/e.rs") is None and selected.why("ex/e.rs") is None
    default = protection([], manifest)  # cargo test builds the examples by default
    assert default.why("examples/e.rs") is not None and default.why("ex/e.rs") is not None
    assert default.why("benches/b.rs") is None
    assert protection(["--all-targets"]).why("benches/b.rs") is not None
    assert protection(["--bench", "b"]).why("benches/b.rs") is not None


def test_without_protect_tests_only_the_hidden_tests_and_the_toolchain_files_stay():
    p = protection(["--test", "mean"], tests=False)
    assert p.why("tests/mean.rs") is not None and p.why("Cargo.toml") is not None
    assert p.why("tests/basic.rs") is None


def test_target_is_given_away_and_back_without_following_links(tmp_path):
    target = tmp_path / "target"
    (target / "debug" / "deps").mkdir(parents=True)
    (target / "debug" / "deps" / "x").write_text("x")
    (target / "debug" / "link").symlink_to("/etc/passwd")
    me = (target.stat().st_uid, target.stat().st_gid)
    assert cargo.chown_tree(str(target), *me) == 5
    assert cargo.chown_tree(str(tmp_path / "missing"), *me) == 0
    (tmp_path / "file").write_text("x")
    assert cargo.chown_tree(str(tmp_path / "file"), *me) == 0


# --- libtest's framing ---------------------------------------------------------------------------------


def test_the_list_is_libtests_or_nothing():
    assert libtest.parse_list(b"a: test\nb::c: test\nd: benchmark\n\n", 0) == (["a", "b::c"], None)
    assert libtest.parse_list(b"", 0) == ([], None)
    names, why = libtest.parse_list(b"a: test\nhello from a constructor\n", 0)
    assert names is None and "not libtest's" in why
    assert libtest.parse_list(b"a: test\na: test\n", 0)[0] is None
    assert libtest.parse_list(b"a: test\n", 101)[0] is None
    assert libtest.parse_list(b"a: test\n", None)[0] is None


def ev(**fields: Any) -> str:
    """A libtest JSON line, spaced as libtest writes it."""
    return "{ " + ", ".join(f'"{k}": {json.dumps(v)}' for k, v in fields.items()) + " }"


def stream(verdicts: list[tuple[str, str]], summary: str | None = None, **counts: int) -> bytes:
    lines = [ev(type="suite", event="started", test_count=counts.pop("count", len(LISTED)))]
    for name, verdict in verdicts:
        lines.append(ev(type="test", event="started", name=name))
        extra = {"stdout": "assertion failed\n"} if verdict == "failed" else {}
        lines.append(ev(type="test", name=name, event=verdict, exec_time=0.001, **extra))
    if summary is not None:
        got = {k: sum(1 for _, v in verdicts if v == k) for k in ("ok", "failed", "ignored")}
        fields = {"passed": got["ok"], "failed": got["failed"], "ignored": got["ignored"], "measured": 0}
        fields.update(filtered_out=0, exec_time=0.01)
        fields.update(counts)
        lines.append(ev(type="suite", event=summary, **fields))
    return ("\n".join(lines) + "\n").encode()


LISTED = ["empty", "many", "two"]
HONEST = [("empty", "failed"), ("many", "ok"), ("two", "ignored")]


def test_an_honest_stream_gives_every_listed_test_its_verdict():
    r = libtest.parse_json(stream(HONEST, "failed"), LISTED, 101, "tests/mean.rs")
    assert not r.contradictions and not r.notes
    assert {n: o for n, (o, _) in r.outcomes().items()} == {"empty": "failed", "many": "passed", "two": "skipped"}
    assert r.failure_output == {"empty": "assertion failed\n"}
    ok = libtest.parse_json(stream([(n, "ok") for n in LISTED], "ok"), LISTED, 0, "x")
    assert not ok.contradictions and all(o == "passed" for o, _ in ok.outcomes().values())


def forged(raw: bytes, status: int = 0) -> libtest.Reading:
    r = libtest.parse_json(raw, LISTED, status, "tests/mean.rs")
    assert r.contradictions, r.notes
    assert all(o == "failed" for o, _ in r.outcomes().values())  # nothing of the binary passes
    return r


def test_a_second_verdict_is_a_contradiction():
    honest = stream([(n, "ok") for n in LISTED], "ok").decode().split("\n")
    raw = "\n".join(honest[:3] + [ev(type="test", name="empty", event="ok")] + honest[3:])
    r = forged(raw.encode())
    assert "a second verdict for empty" in r.contradictions[0]


def test_a_verdict_for_a_test_that_was_not_listed_is_a_contradiction():
    lines = stream(HONEST, "failed").decode().split("\n")
    lines.insert(3, ev(type="test", name="mean::empty", event="ok"))
    assert "not listed" in " ".join(forged("\n".join(lines).encode(), 101).contradictions)


def test_exit_0_before_the_summary_is_a_contradiction():
    r = forged(stream(HONEST[:1]), 0)
    assert "exited with status 0 before libtest's summary" in r.contradictions[0]


def test_a_crash_leaves_the_running_and_the_unreported_tests_failed_without_tampering():
    raw = stream([("empty", "ok")]).decode() + ev(type="test", event="started", name="many") + "\n"
    r = libtest.parse_json(raw.encode(), LISTED, -6, "tests/mean.rs")
    assert not r.contradictions
    assert {n: o for n, (o, _) in r.outcomes().items()} == {"empty": "passed", "many": "failed", "two": "failed"}
    assert any("signal 6" in n for n in r.notes) and any("never finished" in n for n in r.notes)
    killed = libtest.parse_json(raw.encode(), LISTED, None, "x")  # the time limit
    assert not killed.contradictions and any("was killed" in n for n in killed.notes)


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda s: s.replace(b'"passed": 1', b'"passed": 2'), "the summary says 2 passed"),
        (lambda s: s.replace(b'"filtered_out": 0', b'"filtered_out": 1'), "filtered out"),
        (lambda s: s.replace(b'"test_count": 3', b'"test_count": 2'), "announced 2 tests"),
        (lambda s: s + ev(type="test", event="started", name="two").encode() + b"\n", "after the summary"),
        (lambda s: s.replace(b'"event": "failed", "passed"', b'"event": "ok", "passed"'), "summary says ok"),
        (
            lambda s: s.replace(b'"name": "empty", "event": "failed"', b'"name": "empty", "event": "exploded"'),
            "unknown",
        ),
        (lambda s: s + b'{ "type": "test", broken\n', "not one of its events"),
        (lambda s: ev(type="bench", name="x", median=1, deviation=0).encode() + b"\n" + s, "benchmark"),
    ],
)
def test_a_stream_that_disagrees_with_itself_is_a_contradiction(change, words):
    r = forged(change(stream(HONEST, "failed")), 101)
    assert any(words in c for c in r.contradictions), r.contradictions


def test_tests_out_of_the_listed_order_or_overlapping_are_contradictions():
    swapped = stream([("many", "ok"), ("empty", "failed"), ("two", "ok")], "failed")
    assert "out of the listed order" in forged(swapped, 101).contradictions[0]
    overlap = "\n".join(
        [
            ev(type="suite", event="started", test_count=3),
            ev(type="test", event="started", name="empty"),
            ev(type="test", event="started", name="many"),
        ]
    )
    assert "while empty was running" in forged(overlap.encode(), 101).contradictions[0]


def test_the_exit_status_must_be_the_summarys():
    assert "exited with 0" in forged(stream(HONEST, "failed"), 0).contradictions[0]
    assert "exited with 101" in forged(stream([(n, "ok") for n in LISTED], "ok"), 101).contradictions[0]


def test_output_past_the_capture_is_a_note_and_glued_lines_still_count():
    raw = stream([(n, "ok") for n in LISTED], "ok").decode().split("\n")
    raw[2] = "no newline before this" + raw[2]
    raw.insert(1, "a line the library wrote to stdout")
    r = libtest.parse_json("\n".join(raw).encode(), LISTED, 0, "x")
    assert not r.contradictions and all(o == "passed" for o, _ in r.outcomes().values())
    assert any("2 line(s) on stdout" in n for n in r.notes)


def test_the_run_arguments_ask_for_one_thread_and_json():
    args = libtest.run_args()
    assert "--test-threads=1" in args and args[args.index("--format") + 1] == "json" and "--report-time" in args
    assert libtest.list_args() == ["--list", "--format", "terse"]


# --- canaries -------------------------------------------------------------------------------------------


class FakeTree:
    """What make_canaries reads of the repository: a dict of files."""

    def __init__(self, files: dict[str, bytes]):
        self.files = dict(files)
        self.written: dict[str, tuple[bytes, int, tuple[int, int]]] = {}

    def read(self, rel, limit=None):
        return self.files.get(rel)

    def lstat(self, rel):
        return object() if rel in self.files or any(f.startswith(rel + "/") for f in self.files) else None

    def write(self, rel, data, *, mode, owner):
        self.files[rel] = data
        self.written[rel] = (data, mode, owner)


def order_for(check: CheckSpec) -> Order:
    return Order(
        repo="/work/repo",
        patch="/p",
        touched=[],
        hidden_dir="/h",
        uid=1000,
        gid=1000,
        deadline=10.0,
        output_limit=65536,
        report_limit=1 << 20,
        apply_chain=[(m, list(a)) for m, a in APPLY_CHAIN],
        protect=ProtectSpec([], [], [], [], [], True, [], [], []),
        pycache="/opt/pycache",
        check=check,
        env=dict(CONTAINER_ENV),
    )


def test_the_canary_target_copies_the_hidden_tests_and_adds_tests_named_like_the_tasks():
    check = plan(fail_to_pass=["mean::empty_slice"], pass_to_pass=["mean::two_values"])
    tree = FakeTree({"Cargo.toml": rm.CARGO_TOML.encode(), "tests/mean.rs": rm.HIDDEN_TEST.encode()})
    can = cargo.make_canaries(order_for(check), tree)
    assert can is not None and can["copy_of"] == "mean"
    rel = can["path"]
    target = rel[len("tests/") : -len(".rs")]
    assert rel.startswith("tests/") and re.fullmatch(r"[a-z0-9]+_[a-z0-9]+", target)
    data, mode, owner = tree.written[rel]
    assert (mode, owner) == (0o444, (0, 0))
    assert can["digest"] == __import__("hashlib").sha256(data).hexdigest()
    source = data.decode()
    assert source.startswith(rm.HIDDEN_TEST)  # the hidden tests, as they are
    names = re.findall(r"#\[test\]\nfn (\w+)\(\)", source[len(rm.HIDDEN_TEST) :])
    assert {f"{target}::{n}" for n in names} == set(can["expect"])
    assert 2 <= sum(v == "failed" for v in can["expect"].values()) <= 3
    assert 2 <= sum(v == "passed" for v in can["expect"].values()) <= 3
    for name in names:  # named like the task's tests, never like anything in the copied file
        assert name.count("_") >= 1 and name not in {"empty", "many", "two", "mean", "calc", "Error"}


def test_no_copy_where_no_one_file_hidden_target_and_none_where_autotests_is_off():
    check = plan(hidden={"src/tests.rs": "d"})
    tree = FakeTree({"Cargo.toml": rm.CARGO_TOML.encode()})
    can = cargo.make_canaries(order_for(check), tree)
    assert can is not None and can["copy_of"] is None and len(can["expect"]) >= 4
    off = FakeTree(
        {"Cargo.toml": (rm.CARGO_TOML.replace("[dependencies]", "autotests = false\n\n[dependencies]")).encode()}
    )
    assert "autotests" in cargo.make_canaries(order_for(check), off)["skipped"]
    assert cargo.make_canaries(order_for(plan(canaries=False)), tree) is None


def test_canary_bodies_hold_exactly_when_they_must_pass():
    """Each shape's expected value, computed as Rust would: a must-pass body's assertion
    holds, a must-fail one's does not (checked here by evaluating the arithmetic)."""
    import random

    rng = random.Random(7)
    for _ in range(200):
        must_pass = rng.random() < 0.5
        body = cargo.canary_body(rng, must_pass)
        holds = rust_assertion_holds(body)
        assert holds is must_pass, body


def rust_assertion_holds(body: str) -> bool:
    """The canary shapes' assertions, evaluated in Python."""
    if m := re.search(r"let total: i64 = (\[.*\])\.iter\(\)\.sum\(\);\n    assert_eq!\(total, (-?\d+)\);", body):
        return sum(json.loads(m.group(1))) == int(m.group(2))
    if m := re.search(r'let text = "(\w+)"\.repeat\((\d+)\);\n    assert_eq!\(text\.len\(\), (\d+)\);', body):
        return len(m.group(1)) * int(m.group(2)) == int(m.group(3))
    if m := re.search(r"vec!(\[.*\]);\n    items\.sort\(\);\n    assert_eq!\(items\[(\d+)\], (\d+)\);", body):
        return sorted(json.loads(m.group(1)))[int(m.group(2))] == int(m.group(3))
    if m := re.search(
        r'let value: i64 = "(\d+)"\.parse\(\)\.unwrap\(\);\n    assert_eq!\(value \* (\d+), (-?\d+)\);', body
    ):
        return int(m.group(1)) * int(m.group(2)) == int(m.group(3))
    m = re.search(r"assert_eq!\(\d+i32\.checked_div\(0\), (None|Some\(\d+\))\);", body)
    assert m, body
    return m.group(1) == "None"


# --- the report ----------------------------------------------------------------------------------------


def test_the_report_is_framed_and_its_end_is_the_runners_status():
    order = order_for(plan())
    result: dict[str, Any] = {}
    cargo.finish(order, result, 1, ["x" * 100_000], {"mean::empty": "failed"}, [], ["c"], 0.0)
    rep = result["report"]
    assert rep["channel"] == "framed" and rep["end"]["exit"] == 1 and rep["integrity"] == ["c"]
    assert rep["sessions"] == rep["ends"] == 1 and not rep["forged"]
    assert len(result["output"]) < 66_000 and result["exit_code"] == 1
    timed: dict[str, Any] = {}
    cargo.finish(order, timed, None, [], {}, [], [], 0.0, timed_out=True)
    assert timed["timed_out"] and timed["report"]["end"] is None and timed["report"]["ends"] == 0


def test_cargo_tests_default_selection_and_its_selectors():
    targets = [
        cargo.Target("calc", ["lib"], "src/lib.rs"),
        cargo.Target("tool", ["bin"], "src/main.rs"),
        cargo.Target("basic", ["test"], "tests/basic.rs"),
        cargo.Target("demo", ["example"], "examples/demo.rs"),
        cargo.Target("speed", ["bench"], "benches/speed.rs"),
    ]
    for t in targets[3:]:
        t.tested = False

    def names(args: list[str]) -> list[str]:
        return [t.name for t in cargo.selected(targets, args)]

    assert names([]) == ["calc", "tool", "basic"]
    assert names(["--lib", "--test", "basic"]) == ["calc", "basic"]
    assert names(["--tests"]) == ["calc", "tool", "basic"]
    assert names(["--examples"]) == ["demo"]
    assert names(["--all-targets"]) == ["calc", "tool", "basic", "demo", "speed"]
    assert names(["--features", "x", "--bin", "tool"]) == ["tool"]
    assert [t.selector() for t in targets] == [
        ["--lib"],
        ["--bin", "tool"],
        ["--test", "basic"],
        ["--example", "demo"],
        ["--bench", "speed"],
    ]
    assert [t.prefix for t in targets[:3]] == ["", "tool::", "basic::"]


# --- the suite's manifest ---------------------------------------------------------------------------------


def test_the_suite_manifest_is_in_the_builders_schema_and_pinned():
    data = tomllib.loads((SUITE / "manifest.toml").read_text())
    assert data["suite"] == {
        "environment": "rust-1.85",
        "runner": "cargo",
        "language": "rust",
        "limits": {"timeout": 180, "memory": "2g"},
    }
    for name, project in data["projects"].items():
        assert project["registry"] == "crates" and project["package"] == name
        for version, pin in project["releases"].items():
            assert pin["url"] == f"https://static.crates.io/crates/{name}/{name}-{version}.crate"
            assert re.fullmatch(r"[0-9a-f]{64}", pin["sha256"])
    tasks = data["tasks"]
    assert len(tasks) >= 5 and len({t["project"] for t in tasks}) >= 3
    assert not any(t["id"].startswith("unicode-") for t in tasks)
    lists = json.loads((SUITE / "lists.json").read_text())
    assert set(lists) == {t["id"] for t in tasks}
    for t in tasks:
        assert lists[t["id"]]["fail_to_pass"] and len(lists[t["id"]]["base_commit"]) == 40


def test_each_install_writes_our_lock_byte_for_byte():
    """A base release without a Cargo.lock gets locks/<crate>-<version>.Cargo.lock from its
    install step (the printf at its head), and every lock in locks/ is one an install uses."""
    data = tomllib.loads((SUITE / "manifest.toml").read_text())
    used = set()
    for name, project in data["projects"].items():
        install = project["install"]
        if not install.startswith("printf"):
            continue
        head = install.split(" > Cargo.lock && ", 1)[0]
        written = subprocess.run(["sh", "-c", head], capture_output=True, check=True).stdout
        bases = {t["base"] for t in data["tasks"] if t["project"] == name}
        assert len(bases) == 1, f"{name}: one lock for several bases"
        lock = SUITE / "locks" / f"{name}-{bases.pop()}.Cargo.lock"
        assert written == lock.read_bytes(), lock
        used.add(lock.name)
    assert used == {p.name for p in (SUITE / "locks").iterdir()}


# --- the static audit's rules -------------------------------------------------------------------------------


def rules_named(source: str, path: str = "src/lib.rs") -> set[str]:
    return {rule for rule, _, _ in rust_rules.findings(path, source.splitlines())}


@pytest.mark.parametrize(
    "source, rules",
    [
        (rm.RAW_SUCCESS, {"libtest-lines", "descriptors"}),
        (rm.PRINTED_SUCCESS, {"libtest-lines"}),
        (rm.EXIT_ZERO, {"process-exit"}),
        (rm.ABORT, {"process-exit"}),
        (rm.FORGE_ITEMS, {"rerun-self", "libtest-lines", "libtest-internals", "process-exit", "descriptors"}),
        (rm.AIMED_FLIP, {"descriptors", "rerun-self"}),
        (rm.TRUTHFUL_CHILD_ITEMS, {"rerun-self"}),
        (rm.SWAP_BINARY, set()),
        ('#[no_mangle]\npub extern "C" fn write(fd: i32, b: *const u8, n: usize) -> isize { 0 }', {"constructors"}),
        ('#[link_section = ".init_array"]\n#[used]\nstatic INIT: extern "C" fn() = init;', {"constructors"}),
        ("#[ctor::ctor]\nfn init() {}", {"constructors"}),
        ("unsafe { libc::dup2(fd, 1); libc::write(1, p, n); }", {"descriptors"}),
        ('extern "C" {\n    fn write(fd: i32) -> isize;\n}', {"native-code"}),
        ("std::panic::set_hook(Box::new(|_| std::process::exit(0)));", {"process-exit"}),
        ("extern crate test;", {"libtest-internals"}),
    ],
)
def test_the_rules_name_what_the_attacks_reach_for(source, rules):
    assert rules <= rules_named(source), rules_named(source)


def test_the_rules_read_manifests_and_name_build_scripts_by_path():
    assert rules_named(rm.HARNESS_OFF, "Cargo.toml") == {"build-time-code"}
    assert rules_named(rm.CARGO_CONFIG, ".cargo/config.toml") == {"build-time-code"}
    assert "build-time-code" in rules_named(rm.BUILD_RS, "build.rs")
    assert rust_rules.findings("tools/build.rs", []) == [("build-time-code", 0, "tools/build.rs")]
    assert rust_rules.findings("README.md", ["std::process::exit(0);"]) == []


def test_the_rules_stay_quiet_on_honest_code():
    honest = rm.FIXED_LIB + rm.NEW_MODULE + rm.OWN_UNIT_TEST + rm.HONEST_NOISE.replace("test empty ... FAILED", "x")
    assert rules_named(honest) == set()


def added_lines(patch: str) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
            files.setdefault(current or "", [])
        elif line.startswith("+") and current:
            files[current].append(line[1:])
    return files


def test_the_rules_stay_quiet_on_the_suites_gold_patches(tmp_path):
    """Every gold patch of tasks/crates-real (cut from the pinned crates; downloaded once into
    the grader's cache) gives no finding."""
    sys.path.insert(0, str(ROOT / "tasks"))
    import releases

    built = ROOT / "build" / "crates-real"
    if not list(built.glob("*/gold.patch")):
        built = tmp_path / "crates-real"
        releases.suite("crates-real").build(built, provisional=True, force=True, log=lambda _: None)
    golds = sorted(built.glob("*/gold.patch"))
    assert len(golds) == len(releases.suite("crates-real").manifest().tasks)
    found = []
    for gold in golds:
        for path, lines in added_lines(gold.read_text(errors="replace")).items():
            found += [(gold.parent.name, *f) for f in rust_rules.findings(path, lines)]
    assert found == []


def test_the_rules_are_compiled_patterns_over_rust_and_toml_files():
    assert rust_rules.SUFFIXES == (".rs", ".toml")
    assert all(isinstance(p, re.Pattern) for ps in rust_rules.RULES.values() for p in ps)
    assert stat.S_ISREG((ROOT / "grader" / "audit_rules" / "rust.py").stat().st_mode)
