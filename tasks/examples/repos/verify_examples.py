"""Check the example suite on the host, without the grader's pipeline or Docker.

For every tasks/examples/*/task.yaml:

- it loads through grader.tasks.model.Task, its id is its directory's name, and every file
  it names exists; its gold patch is `git diff` output that leaves the hidden tests alone;
- in a fresh clone of its bundle at the base commit (with the merge left conflicted, for a
  merge task), the check run as the grader runs it must FAIL, and every FAIL_TO_PASS test
  must fail and every PASS_TO_PASS test pass there;
- after `git apply gold.patch` (then the hidden tests written over), the check must PASS;
- output tasks: at the base the output differs (below the threshold, when there is one);
  merge tasks: the conflicted tree has markers in exactly the listed paths, and after the
  gold patch those paths are byte-identical to the merge commit's.

Then the bundles and task files must be current: make_repos.py is run twice (the shas and
the bundle bytes must agree, and agree with repos/*.bundle) and make_examples.py writes
the suite to a scratch directory, which must equal what is here.

The tests run with the project's venv Python (pytest is there); `python3` in commands is
that interpreter too, as /opt/venv is on PATH in the image. A task's `install` step is
not run here (the repositories' pytest configuration puts the root on sys.path).

    .venv/bin/python tasks/examples/repos/verify_examples.py [TASK_ID ...]

Standard library and PyYAML.
"""

from __future__ import annotations

import argparse
import difflib
import filecmp
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SUITE = HERE.parent
PROJECT = SUITE.parent.parent
PYTHON = PROJECT / ".venv" / "bin" / "python"
if not PYTHON.exists():
    PYTHON = Path(sys.executable)

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "TZ": "UTC", "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "grader", "GIT_AUTHOR_EMAIL": "grader@localhost",
           "GIT_COMMITTER_NAME": "grader", "GIT_COMMITTER_EMAIL": "grader@localhost"}
PASS, FAIL = "PASS", "FAIL"


def load_task_model():
    """grader.tasks.model.Task; if the package does not import (mid-edit), the module by path."""
    sys.path.insert(0, str(PROJECT))
    try:
        from grader.tasks.model import Task
        return Task
    except Exception:
        spec = importlib.util.spec_from_file_location("_task_model", PROJECT / "grader" / "tasks" / "model.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Task


def git(cwd: Path, *args: str, check: bool = True, input: bytes | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", "-c", "core.autocrlf=false", "-c", "advice.detachedHead=false", *args],
                          cwd=cwd, env={**os.environ, **GIT_ENV, "HOME": str(cwd)}, capture_output=True, input=input)
    if check and proc.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc


def run(cwd: Path, argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{PYTHON.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=120)


# the grader's text normalisation and similarity (grader/metrics.py), restated so that
# this script needs nothing of the grader but the task model
def normalize_text(text: str, *, line_endings: bool, trailing_whitespace: bool) -> str:
    if line_endings:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if trailing_whitespace:
        text = "\n".join(line.rstrip() for line in text.split("\n")).rstrip("\n")
        text = text + "\n" if text else text
    return text


def similarity(a: str, b: str) -> float:
    return 1.0 if a == b else difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def normalized(data: bytes, normalize) -> bytes:
    if not (normalize.line_endings or normalize.trailing_whitespace):
        return data
    return normalize_text(data.decode("utf-8", "surrogateescape"), line_endings=normalize.line_endings,
                          trailing_whitespace=normalize.trailing_whitespace).encode("utf-8", "surrogateescape")


@dataclass
class Outcome:
    verdict: str
    detail: str = ""
    tests: dict[str, str] = field(default_factory=dict)  # node id -> passed / failed


def junit_outcomes(path: Path) -> dict[str, str]:
    """node id -> passed / failed / skipped, from pytest's xunit1 report (which names each case's file)."""
    if not path.exists():
        return {}
    out = {}
    for case in ET.parse(path).iter("testcase"):
        file, classname, name = case.get("file"), case.get("classname", ""), case.get("name", "")
        if not file:
            continue
        module = file.removesuffix(".py").replace("/", ".")
        classes = classname.removeprefix(module).strip(".")
        node = "::".join([file, *([c for c in classes.split(".") if c]), name])
        kinds = {child.tag for child in case}
        out[node] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return out


class Verifier:
    def __init__(self, task, task_dir: Path, scratch: Path):
        self.task, self.dir, self.scratch = task, task_dir, scratch
        self.problems: list[str] = []
        self.mirror = scratch / "mirror.git"
        git(scratch, "clone", "-q", "--mirror", str(task.file(task.repo.bundle)), str(self.mirror))
        self.hidden = self._hidden_files()

    def fail(self, message: str) -> None:
        self.problems.append(message)

    def base(self, name: str) -> Path:
        """A fresh clone at the base commit; for a merge task, with the merge in progress."""
        dest = self.scratch / name
        git(self.scratch, "clone", "-q", "--no-checkout", str(self.mirror), str(dest))
        git(dest, "checkout", "-q", "--detach", self.task.repo.commit)
        if self.task.repo.merge:
            merge = git(dest, "merge", "--no-commit", "--no-ff", self.task.repo.merge, check=False)
            if merge.returncode != 1:
                self.fail(f"merging {self.task.repo.merge[:12]} did not conflict (exit {merge.returncode})")
        return dest

    def _hidden_files(self) -> dict[str, bytes]:
        check = self.task.check
        if check.type != "tests":
            return {}
        if not check.test_patch:
            return {rel: self.task.read(src) for rel, src in check.hidden_tests.items()}
        repo = self.base("test-patch")
        patch = self.task.read(check.test_patch)
        applied = git(repo, "apply", "-", input=patch, check=False)
        if applied.returncode:
            self.fail(f"test_patch does not apply: {applied.stderr.decode(errors='replace').strip()}")
            return {}
        names = git(repo, "apply", "--numstat", "-", input=patch).stdout.decode().split("\n")
        return {line.split("\t")[2]: (repo / line.split("\t")[2]).read_bytes() for line in names if line.strip()}

    def state(self, name: str, patch: bytes | None) -> Path | None:
        """The base, with `patch` applied, then the hidden tests written over it."""
        repo = self.base(name)
        if patch and patch.startswith(b"From "):  # a series of commits (a history task's gold)
            applied = git(repo, "am", "--empty=keep", input=patch, check=False)
            if applied.returncode:
                self.fail(f"gold.patch does not apply with git am: {applied.stderr.decode(errors='replace').strip()}")
                return None
        elif patch:
            applied = git(repo, "apply", "--whitespace=nowarn", "-", input=patch, check=False)
            if applied.returncode:
                self.fail(f"gold.patch does not apply: {applied.stderr.decode(errors='replace').strip()}")
                return None
        for rel, data in self.hidden.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(data)
        return repo

    # --- the three checks, each as the grader decides it ---------------------------------------

    def evaluate(self, repo: Path) -> Outcome:
        check = self.task.check
        if check.type == "tests":
            return self._tests(repo)
        if check.type == "output":
            return self._output(repo)
        if check.type == "history":
            return self._history(repo)
        if check.type == "bisect":
            return self._bisect(repo)
        return self._exact(repo)

    def _history(self, repo: Path) -> Outcome:
        """The final tree only (the grader's other criteria need the grader): the last commit's
        tree is the reference's, with at least one commit made."""
        check = self.task.check
        made = git(repo, "rev-list", "--count", f"{self.task.repo.commit}..HEAD").stdout.decode().strip()
        have = git(repo, "rev-parse", "HEAD^{tree}").stdout
        want = git(self.mirror, "rev-parse", f"{check.reference}^{{tree}}").stdout
        ok = have == want and made != "0"
        return Outcome(PASS if ok else FAIL, f"{made} commit(s), {'the' if have == want else 'not the'} reference tree")

    def _bisect(self, repo: Path) -> Outcome:
        path = repo / "BISECT_ANSWER"
        answer = path.read_text().strip() if path.is_file() else ""
        ok = bool(answer) and self.task.check.commit.startswith(answer)
        return Outcome(PASS if ok else FAIL, f"answer {answer[:12] or 'none'}")

    def _tests(self, repo: Path) -> Outcome:
        check = self.task.check
        if check.runner == "command":
            proc = run(repo, ["sh", "-c", check.command])
            return Outcome(PASS if proc.returncode == 0 else FAIL, f"exit {proc.returncode}")
        report = repo.parent / f"{repo.name}-junit.xml"
        # as the grader chooses: `paths`, else the hidden test files and the files the lists name
        named = {t.split("::", 1)[0] for t in check.fail_to_pass + check.pass_to_pass}
        paths = check.paths or sorted({rel for rel in self.hidden if rel.endswith(".py")} | named)
        proc = run(repo, [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
                          f"--junitxml={report}", *check.pytest_args, *paths])
        tests = junit_outcomes(report)
        listed = check.fail_to_pass + check.pass_to_pass
        if listed:
            ok = all(tests.get(t) == "passed" for t in listed)
        else:
            ok = proc.returncode == 0
        counts = {k: sum(1 for v in tests.values() if v == k) for k in ("passed", "failed")}
        return Outcome(PASS if ok else FAIL, f"pytest exit {proc.returncode}, {counts['passed']} passed, "
                                             f"{counts['failed']} failed", tests)

    def _output(self, repo: Path) -> Outcome:
        check = self.task.check
        proc = run(repo, ["sh", "-c", check.command])
        want = normalized(self.task.read(check.expected), check.normalize).decode()
        have = normalized(proc.stdout, check.normalize).decode(errors="replace")
        ratio = similarity(have, want)
        ok = ratio >= check.threshold if check.threshold is not None else have == want
        return Outcome(PASS if ok else FAIL, f"similarity {ratio:.3f}")

    def expected_files(self) -> dict[str, bytes]:
        check = self.task.check
        if check.files:
            return {rel: self.task.read(src) for rel, src in check.files.items()}
        return {rel: git(self.mirror, "show", f"{check.expected_commit}:{rel}").stdout for rel in check.paths}

    def _exact(self, repo: Path) -> Outcome:
        check = self.task.check
        differ = []
        for rel, want in self.expected_files().items():
            path = repo / rel
            have = path.read_bytes() if path.is_file() else None
            if have is None or normalized(have, check.normalize) != normalized(want, check.normalize):
                differ.append(rel)
        return Outcome(FAIL if differ else PASS, f"differ: {', '.join(differ)}" if differ else "all match")

    # --- the task ---------------------------------------------------------------------------------

    def verify(self) -> tuple[Outcome | None, Outcome | None]:
        task, check = self.task, self.task.check
        gold = task.gold_patch_text()
        series = check.type == "history"
        if not gold or not gold.startswith(b"From " if series else b"diff --git a/"):
            self.fail("gold.patch is not `git format-patch` output" if series else "gold.patch is not `git diff` output")
        touched = set()
        for line in (gold or b"").decode(errors="replace").splitlines():
            if line.startswith("diff --git a/"):
                touched.add(line.split(" b/", 1)[1])
        if touched & set(self.hidden):
            self.fail(f"gold.patch touches hidden test files {sorted(touched & set(self.hidden))}")

        empty_repo = self.state("empty", None)
        if task.repo.merge and empty_repo is not None:
            unmerged = sorted(git(empty_repo, "diff", "--name-only", "--diff-filter=U").stdout.decode().split())
            if unmerged != sorted(check.compared_paths()):
                self.fail(f"conflicted paths {unmerged} are not the checked paths {check.compared_paths()}")
            for rel in unmerged:
                if b"<<<<<<< " not in (empty_repo / rel).read_bytes():
                    self.fail(f"{rel} has no conflict markers at the base")
        empty = self.evaluate(empty_repo)
        if empty.verdict != FAIL:
            self.fail(f"the empty patch gives {empty.verdict} ({empty.detail}), not FAIL")
        if check.type == "tests":
            for t in check.fail_to_pass:
                if empty.tests.get(t) == "passed":
                    self.fail(f"FAIL_TO_PASS {t} passes at the base")
            for t in check.pass_to_pass:
                if empty.tests.get(t) != "passed":
                    self.fail(f"PASS_TO_PASS {t} does not pass at the base ({empty.tests.get(t, 'not run')})")

        gold_repo = self.state("gold", gold) if gold else None
        if gold_repo is None:
            return empty, None
        result = self.evaluate(gold_repo)
        if result.verdict != PASS:
            self.fail(f"the gold patch gives {result.verdict} ({result.detail}), not PASS")
        if check.type == "tests":
            for t in check.fail_to_pass + check.pass_to_pass:
                if result.tests.get(t) != "passed":
                    self.fail(f"{t} does not pass with the gold patch ({result.tests.get(t, 'not run')})")
            if check.runner == "pytest" and not check.fail_to_pass + check.pass_to_pass:
                if not result.tests or any(v != "passed" for v in result.tests.values()):
                    self.fail(f"with the gold patch not every hidden test passes: {result.tests}")
        if task.repo.merge:
            for rel, want in self.expected_files().items():
                if (gold_repo / rel).read_bytes() != want:
                    self.fail(f"{rel} after the gold patch is not byte-identical to the merge commit's")
        return empty, result


def verify_tasks(ids: list[str]) -> int:
    Task = load_task_model()
    files = sorted(SUITE.glob("*/task.yaml")) + sorted((SUITE.parent / "git").glob("*/task.yaml"))
    if ids:
        files = [f for f in files if f.parent.name in ids]
    failures = 0
    print(f"{'task':28} {'check':20} {'empty patch':32} {'gold patch':32}")
    for path in files:
        try:
            task = Task(**yaml.safe_load(path.read_text()), root=path.parent)
        except Exception as e:  # a broken task file is a finding, not a crash
            failures += 1
            print(f"{path.parent.name:28} DOES NOT LOAD: {e}")
            continue
        problems = [] if task.id == path.parent.name else [f"id {task.id!r} is not the directory name"]
        for rel in task.referenced_files():
            try:
                task.file(rel)
            except Exception as e:
                problems.append(str(e))
        kind = task.check.type + (f" ({task.check.runner})" if task.check.type == "tests" else "")
        kind += " +merge" if task.repo.merge else ""
        with tempfile.TemporaryDirectory(prefix=f"verify-{task.id}-") as tmp:
            try:
                v = Verifier(task, path.parent, Path(tmp))
                empty, gold = v.verify()
                problems += v.problems
            except Exception as e:
                empty = gold = None
                problems.append(f"{type(e).__name__}: {e}")
        show = lambda o: f"{o.verdict} ({o.detail})" if o else "-"  # noqa: E731
        print(f"{task.id:28} {kind:20} {show(empty):32} {show(gold):32}")
        for p in problems:
            print(f"    PROBLEM {p}")
        failures += bool(problems)
    print(f"{len(files)} task(s), {failures} with problems")
    return failures


def verify_current() -> int:
    """The bundles and task files here are what the generators write today."""
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(SUITE))
    import make_examples
    import make_repos

    problems = make_repos.check(HERE)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "suite"
        subprocess.run([str(PYTHON), str(SUITE / "make_examples.py"), "--out", str(out)], check=True,
                       capture_output=True)
        for task_id in make_examples.TASKS:
            cmp = filecmp.dircmp(out / task_id, SUITE / task_id)
            stack = [cmp]
            while stack:
                c = stack.pop()
                for name in c.left_only:
                    problems.append(f"{task_id}: {name} missing here (make_examples.py writes it)")
                for name in c.right_only:
                    problems.append(f"{task_id}: {name} is here but make_examples.py does not write it")
                _, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
                for name in mismatch + errors:
                    problems.append(f"{task_id}: {name} differs from what make_examples.py writes")
                stack += c.subdirs.values()
        if (out / "suite.yaml").read_bytes() != (SUITE / "suite.yaml").read_bytes():
            problems.append("suite.yaml differs from what make_examples.py writes")
        strays = sorted(p.parent.name for p in SUITE.glob("*/task.yaml") if p.parent.name not in make_examples.TASKS)
        problems += [f"{s}: a task directory make_examples.py does not know" for s in strays]
    for p in problems:
        print(f"PROBLEM {p}")
    if not problems:
        print("bundles and task files are current; make_repos.py gives the same shas and bytes on every run")
    return len(problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="only these tasks (default: all)")
    parser.add_argument("--skip-rebuild", action="store_true", help="do not check that bundles and files are current")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        print("git is required", file=sys.stderr)
        return 2
    failures = verify_tasks(args.ids)
    if not args.skip_rebuild:
        print()
        failures += verify_current()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
