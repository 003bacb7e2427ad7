"""The report plugin: the only voice of a pytest run the supervisor listens to.

Standard library and pytest only. The supervisor writes this file, under a module name
drawn at random for every run, into a root-owned directory, and names it with `-p`, so
pytest imports it while it parses its arguments: before any conftest.py, test module or
code of the submission is imported. With entry-point auto-loading off, nothing the
repository ships can be loaded earlier.

At import it takes its two descriptors and the canary module's path from the environment
(and deletes the variables):
a pipe holding the run's secret, read once and closed, and the write end of the report
pipe, which it marks not inheritable so subprocesses of the tests never get it. Every
record it writes carries an HMAC-SHA256 chained over the records before it, keyed by the
secret. Code in the test process can still write to the pipe (it can find the descriptor
in /proc/self/fd), but not in the run's name without taking the secret out of this
module's memory: a report with a line the chain does not vouch for is not trusted, and
the run's hidden canary tests catch what lies earlier, in the report objects themselves.
"""

import hashlib
import hmac
import json
import os


def _channel():
    canaries = os.environ.pop("GRADER_CANARIES", "")
    report_fd = int(os.environ.pop("GRADER_REPORT_FD"))
    key_fd = int(os.environ.pop("GRADER_KEY_FD"))
    key = b""
    while True:
        chunk = os.read(key_fd, 256)
        if not chunk:
            break
        key += chunk
    os.close(key_fd)
    os.set_inheritable(report_fd, False)
    chain = [b""]

    def emit(record):
        line = json.dumps(record, sort_keys=True, ensure_ascii=True)
        mac = hmac.new(key, chain[0] + line.encode(), hashlib.sha256).hexdigest()
        chain[0] = mac.encode()
        data = (line + "\t" + mac + "\n").encode()
        while data:
            data = data[os.write(report_fd, data):]

    return emit, tuple(c + "::" for c in canaries.split(os.pathsep) if c)


_emit, _canaries = _channel()
del _channel

import pytest  # noqa: E402  (after the channel: nothing of pytest's runs before the secret is taken)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_logreport(report):
    """Around every other plugin's: the record is written as the report arrives, before
    any of them (pytest's own session counting, the terminal) sees it."""
    _emit({"t": "test", "id": report.nodeid, "when": report.when, "outcome": report.outcome,
           "xfail": bool(getattr(report, "wasxfail", False)), "d": round(float(report.duration or 0), 4)})
    if report.nodeid.startswith(_canaries):
        # Recorded as they are; shown to everything after this as passed, so the canaries
        # print no traceback (their source stays unseen) and count for nothing in the exit
        # status, which stays the task's tests' alone.
        report.outcome = "passed"
        report.longrepr = None
        report.sections = []
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report):
    if report.failed:
        _emit({"t": "collect", "id": report.nodeid, "outcome": "error"})


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _emit({"t": "end", "exit": int(exitstatus), "collected": int(session.testscollected)})
