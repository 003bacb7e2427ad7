"""libtest's framing, read strictly: what the supervisor makes of a Rust test binary's own
output. Standard library only, Python 3.9+, pure (no processes, no files): the cargo
runner (runners/cargo.py) runs the binaries and hands their bytes here.

Rust's test harness (libtest) is linked into every test binary and prints its outcomes on
that process's stdout; a stable toolchain loads no reporter into it. So the channel is
libtest's own stream, checked against what the same binary said it would run:

- `BINARY --list --format terse` names the tests, one `NAME: test` line each, sorted by
  name (`parse_list`);
- `BINARY --test-threads=1 -Z unstable-options --format json --report-time` (with
  RUSTC_BOOTSTRAP=1 in the binary's environment; `run_args`) announces each test, then
  gives its verdict, one test at a time, in the listed order, then the suite's summary
  (`parse_json`). Every listed test must be announced and judged exactly once, while it is
  the one running; the summary must come last, count the verdicts and agree with the
  binary's exit status (0 ok, 101 failed). A line naming a test that was not listed, a
  second verdict, a verdict out of turn, a summary or an exit status that disagrees, an
  event after the summary, or exit status 0 without a summary is a contradiction: the
  stream was written by something other than libtest, and none of the binary's tests
  passes. A binary that crashes (a signal, an abort, a non-zero exit before its summary)
  leaves the running test and every unreported one failed, a note, not tampering.

libtest captures what a test prints through `print!` and the panic machinery per test, so
honest output lands inside a JSON string (a failed test's `stdout`), never as a line of the
stream; only output written past the capture (`io::stdout().write_all`, `libc::write(1,
...)`, a child process) reaches it, and a line of that output that is not an event is a
note. What this cannot catch: code under test that writes the rest of its own binary's
stream consistently (every remaining test in order, a summary whose counts agree) and
exits 0 before libtest speaks. That is indistinguishable from libtest; the task's public
view says so (runners/cargo.py, DECIDED_BY).
"""

from __future__ import annotations

import json
import re
from typing import Any

LIBTEST_OK, LIBTEST_FAILED = 0, 101
EVENT_PREFIX = '{ "type": '  # how libtest's JSON formatter begins every line
LIST_LINE = re.compile(r"^(\S+): (test|benchmark)$")
VERDICT = {"ok": "passed", "failed": "failed", "ignored": "skipped"}


def list_args() -> list[str]:
    return ["--list", "--format", "terse"]


def run_args() -> list[str]:
    """One test at a time (so that each is announced before it runs and judged before the
    next one starts), in libtest's JSON format with each test's time."""
    return ["--test-threads=1", "-Z", "unstable-options", "--format", "json", "--report-time"]


def parse_list(out: bytes, status: int | None) -> tuple[list[str] | None, str | None]:
    """The tests `--list --format terse` names, in its order; (None, why) when the listing
    is not libtest's (a non-zero exit, a line of another shape, a name given twice: a target
    with `harness = false`, or code that prints while the binary starts)."""
    if status != 0:
        return None, f"listing its tests exited with status {status}"
    names: list[str] = []
    for line in out.decode("utf-8", errors="replace").split("\n"):
        if not line.strip():
            continue
        m = LIST_LINE.match(line)
        if m is None:
            return None, f"a line of its test list is not libtest's: {line[:120]!r}"
        if m.group(2) == "test":
            names.append(m.group(1))
    if len(set(names)) != len(names):
        return None, "its test list names a test twice"
    return names, None


class Reading:
    """What one binary's run established: a verdict per listed test, the contradictions
    (tampering evidence), notes, and what the failed tests printed."""

    def __init__(self, listed: list[str]):
        self.listed = listed
        self.verdicts: dict[str, tuple[str, float]] = {}
        self.contradictions: list[str] = []
        self.notes: list[str] = []
        self.failure_output: dict[str, str] = {}

    def outcomes(self) -> dict[str, tuple[str, float]]:
        """Every listed test: its verdict, failed when it had none, and every one failed
        when the stream contradicted itself."""
        out = {}
        for name in self.listed:
            outcome, d = self.verdicts.get(name, ("failed", 0.0))
            out[name] = ("failed", d) if self.contradictions else (outcome, d)
        return out


def check_summary(r: Reading, summary: dict[str, Any] | None, status: int | None, where: str) -> None:
    got = {
        k: sum(1 for v, _ in r.verdicts.values() if v == o)
        for k, o in (("passed", "passed"), ("failed", "failed"), ("ignored", "skipped"))
    }
    if summary is None:
        missing = sum(1 for n in r.listed if n not in r.verdicts)
        if status == 0:
            r.contradictions.append(f"{where}: exited with status 0 before libtest's summary ({missing} unreported)")
        else:
            how = "was killed" if status is None else f"ended by signal {-status}" if status < 0 else f"exited {status}"
            r.notes.append(f"{where}: {how} before libtest's summary; {missing} unreported test(s) count as failed")
        return
    for key in ("passed", "failed", "ignored"):
        if summary.get(key) != got[key]:
            r.contradictions.append(f"{where}: the summary says {summary.get(key)} {key}, the verdicts {got[key]}")
    if summary.get("filtered_out") not in (0, None) or summary.get("measured") not in (0, None):
        r.contradictions.append(f"{where}: the summary counts tests that were filtered out or measured")
    if len(r.verdicts) != len(r.listed):
        r.contradictions.append(f"{where}: a summary after {len(r.verdicts)} of {len(r.listed)} listed tests")
    want_event = "failed" if got["failed"] else "ok"
    if summary["event"] != want_event:
        r.contradictions.append(f"{where}: the summary says {summary['event']}, the verdicts {want_event}")
    want_status = LIBTEST_FAILED if summary["event"] == "failed" else LIBTEST_OK
    if status != want_status:
        r.contradictions.append(f"{where}: the summary says {summary['event']} but the binary exited with {status}")


def parse_json(out: bytes, listed: list[str], status: int | None, where: str) -> Reading:
    """The binary's stdout under `run_args()`, read against its list (see the module)."""
    r = Reading(listed)
    order = {name: i for i, name in enumerate(listed)}
    started = False
    running: str | None = None
    position = 0  # the index in `listed` of the next test libtest must announce
    summary: dict[str, Any] | None = None
    noise = 0
    for raw in out.decode("utf-8", errors="replace").split("\n"):
        at = raw.find(EVENT_PREFIX)
        if at < 0:
            noise += bool(raw.strip())
            continue
        if at > 0:
            noise += 1  # output without a newline before libtest's line: the line still counts
        try:
            ev = json.loads(raw[at:])
            kind, event = ev["type"], ev.get("event")
        except (ValueError, KeyError, TypeError, AttributeError):
            r.contradictions.append(f"{where}: a line shaped like libtest's that is not one of its events")
            continue
        if summary is not None:
            r.contradictions.append(f"{where}: a libtest event after the summary: {raw[at:][:160]}")
            continue
        if kind == "suite" and event == "started":
            if started:
                r.contradictions.append(f"{where}: the suite started twice")
            elif ev.get("test_count") != len(listed):
                r.contradictions.append(
                    f"{where}: the suite announced {ev.get('test_count')} tests, {len(listed)} listed"
                )
            started = True
        elif kind == "suite" and event in ("ok", "failed"):
            if not started:
                r.contradictions.append(f"{where}: a summary before the suite started")
            summary = ev
        elif kind == "test":
            name = ev.get("name")
            if not isinstance(name, str) or name not in order:
                r.contradictions.append(f"{where}: an event for {name!r}, a test that was not listed")
                continue
            if not started:
                r.contradictions.append(f"{where}: an event for {name} before the suite started")
            if event == "started":
                if running is not None:
                    r.contradictions.append(f"{where}: {name} started while {running} was running")
                elif position >= len(listed) or listed[position] != name:
                    r.contradictions.append(f"{where}: {name} started out of the listed order")
                running = name
                position = order[name] + 1
            elif event in VERDICT:
                if name in r.verdicts:
                    r.contradictions.append(f"{where}: a second verdict for {name} ({event})")
                    continue
                if running != name:
                    r.contradictions.append(f"{where}: a verdict for {name} while {running} was running")
                exec_time = ev.get("exec_time")
                d = float(exec_time) if isinstance(exec_time, (int, float)) else 0.0
                r.verdicts[name] = (VERDICT[event], d)
                if event == "failed" and isinstance(ev.get("stdout"), str):
                    r.failure_output[name] = ev["stdout"]
                running = None
            elif event == "timeout":
                r.notes.append(f"{where}: {name} has been running for over 60 s")
            else:
                r.contradictions.append(f"{where}: an unknown event {event!r} for {name}")
        elif kind == "bench":
            r.contradictions.append(f"{where}: a benchmark result, and no benchmark was run")
        else:
            r.contradictions.append(f"{where}: an unknown libtest line {raw[at:][:120]!r}")
    if running is not None:
        r.notes.append(f"{where}: {running} started and never finished (the binary crashed or exited in it)")
    if noise:
        r.notes.append(f"{where}: {noise} line(s) on stdout that are not libtest's (written past its capture)")
    check_summary(r, summary, status, where)
    return r
