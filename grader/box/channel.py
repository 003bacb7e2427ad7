"""The report channel of one check: a secret in a root-only file the test process gets
only as a descriptor, the report on an inherited pipe, every record signed with an HMAC
chained per session. The supervisor checks each chain line by line."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from typing import Any

from . import bytecode, resource
from .order import Order
from .paths import RUN_DIR
from .proc import Capture

PLUGIN = "reporters/pytest_plugin.py"  # the report plugin, in this package
PHASES = ("setup", "call", "teardown")
TEST_OUTCOMES = ("passed", "failed", "skipped")


def malformed(rec: Any) -> str | None:
    """What is wrong with a signed record's shape, if anything. The reporter signs what the
    runner hands it, and code in the test process can hand it anything: a record of the
    wrong shape is the test process's doing, so it is forgery, never a fault of ours."""
    if not isinstance(rec, dict):
        return "not an object"
    kind = rec.get("t")
    if kind == "test":
        if not isinstance(rec.get("id"), str) or rec.get("when") not in PHASES:
            return "a test record without a test id or phase"
        if rec.get("outcome") not in TEST_OUTCOMES:
            return "a test record with an unknown outcome"
    elif kind == "end":
        if not isinstance(rec.get("exit"), int) or isinstance(rec.get("exit"), bool):
            return "an end record without an exit status"
    elif kind == "collect":
        if not isinstance(rec.get("id"), str):
            return "a collection record without a path"
    elif kind in ("integrity", "finding"):
        if not isinstance(rec.get("what"), str):
            return "an integrity record without a finding"
    elif kind != "start":
        return "a record of an unknown kind"
    return None


def read_report(data: bytes, key: bytes) -> dict[str, Any]:
    """Check each session's chain of signatures line by line (a command may run pytest
    more than once); fold the records into outcomes (a test seen in several sessions
    keeps its worst), and keep what the plugin saw of the process (`integrity`)."""
    rep: dict[str, Any] = {
        "forged": None,
        "end": None,
        "ends": 0,
        "sessions": 0,
        "phases": {},
        "collect_errors": [],
        "integrity": [],
        "findings": [],
    }
    chains: dict[str, bytes] = {}
    ended: set[str] = set()
    # the plugin writes one record per test and phase, and nothing after its last word:
    # anything else came through it from the test process
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        body, _, mac = line.rpartition(b"\t")
        try:
            rec = json.loads(body)
            sid = rec["s"] if isinstance(rec, dict) else None
            if not isinstance(sid, str):
                raise TypeError(sid)
        # anything the test process wrote: nesting past the recursion limit, bytes that
        # are no text, a number too large to convert... is not this run's record
        except Exception:  # noqa: BLE001
            rep["forged"] = f"line {n} of the report channel does not carry this run's signature"
            break
        want = hmac.new(key, chains.get(sid, b"") + body, hashlib.sha256).hexdigest().encode()
        if not body or not hmac.compare_digest(want, mac):
            rep["forged"] = f"line {n} of the report channel does not carry this run's signature"
            break
        chains[sid] = mac
        if sid in ended:
            rep["forged"] = f"line {n} of the report came after pytest's last word"
            break
        problem = malformed(rec)
        if problem:
            rep["forged"] = f"line {n} of the report is malformed ({problem})"
            break
        kind = rec["t"]
        if kind == "end":
            ended.add(sid)
            rep["end"] = rec if rep["end"] is None or rec["exit"] != 0 else rep["end"]
        elif kind == "collect":
            rep["collect_errors"].append(rec["id"])
        elif kind == "integrity":
            rep["integrity"].append(rec["what"])
        elif kind == "finding":
            if len(rep["findings"]) < 100:
                rep["findings"].append(rec["what"])
        elif kind == "test":
            phases = rep["phases"].setdefault((sid, rec["id"]), {})
            if rec["when"] in phases:
                rep["forged"] = f"line {n} of the report repeats the {rec['when']} of {rec['id']}"
                break
            phases[rec["when"]] = rec["outcome"]
    rep["sessions"], rep["ends"] = len(chains), len(ended)
    outcomes: dict[str, str] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
    for (_, tid), ph in rep.pop("phases").items():
        setup, call, teardown = ph.get("setup"), ph.get("call"), ph.get("teardown")
        if setup == "failed":
            outcome = "error"
        elif call == "failed":
            outcome = "failed"
        elif teardown == "failed":
            outcome = "error"
        elif "skipped" in (setup, call):
            outcome = "skipped"
        elif call == "passed":
            outcome = "passed"
        else:
            outcome = "error"
        if tid not in outcomes or rank[outcome] > rank[outcomes[tid]]:
            outcomes[tid] = outcome
    rep["outcomes"] = outcomes
    return rep


def write_plugin(order: Order) -> tuple[str, str]:
    """The report plugin under a module name of this run only, in a root-owned directory
    on the environment's own sys.path (its site-packages, where this interpreter finds
    it too), so a command that sets PYTHONPATH still loads it; also returned as a
    directory to put on PYTHONPATH where site-packages cannot be written."""
    module = "grader_report_" + secrets.token_hex(8)
    data = resource(PLUGIN)
    import sysconfig

    purelib = sysconfig.get_paths().get("purelib")
    dirs = [purelib] if purelib and os.path.isdir(purelib) else []
    d = tempfile.mkdtemp(prefix=".grader-", dir="/tmp")
    os.chmod(d, 0o755)
    for where in dirs + [d]:
        path = os.path.join(where, module + ".py")
        try:
            with open(path, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), 0o444)
        except OSError:
            continue
        bytecode.place_for_pytest(PLUGIN, path, order.pycache)  # compiled once, not by every test process
    return d, module


class Channel:
    """The report channel of one check: the secret (and the plugin's settings) in a
    root-only file the test process gets only as a descriptor, the report on a pipe."""

    def __init__(self, order: Order, settings: dict[str, Any]):
        self.key = secrets.token_bytes(32)
        fd, path = tempfile.mkstemp(prefix=".grader-key-", dir=RUN_DIR)
        os.write(fd, self.key + json.dumps(settings).encode())
        os.close(fd)
        self.key_fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        self.rep_r, self.rep_w = os.pipe()
        self.report = Capture(self.rep_r, order.report_limit)
        self.limit = order.report_limit

    def env(self) -> dict[str, Any]:
        return {"GRADER_REPORT_FD": str(self.rep_w), "GRADER_KEY_FD": str(self.key_fd)}

    def fds(self) -> tuple[int, int]:
        return (self.rep_w, self.key_fd)

    def close(self) -> None:
        os.close(self.rep_w)
        os.close(self.key_fd)

    def read(self, canaries: dict[str, Any] | None) -> dict[str, Any]:
        self.report.join(5)
        if not self.report.complete():
            return {"problem": f"the test report was larger than {self.limit:,} bytes"}
        rep = read_report(self.report.data(), self.key)
        if canaries and "expect" in canaries:
            canaries["got"] = {tid: rep["outcomes"].pop(tid, None) for tid in canaries["expect"]}
        return rep


def plugin_settings(order: Order, canaries: dict[str, Any] | None) -> dict[str, Any]:
    tests = sorted(set(order.check.trusted_tests))
    return {
        "repo": order.repo,
        "tests": tests,
        # never empty: an empty list would make every repository file the submission's
        "changed": order.check.submitted or ["\0none"],
        "canaries": [canaries["path"]] if canaries and "expect" in canaries else [],
    }
