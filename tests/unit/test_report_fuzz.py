"""Issue 18, class 6: the report readers never raise on what the test process wrote.

The plugin signs what pytest hands it, and code in the test process can hand it
anything; lines can also be written to the pipe unsigned. Every field of every record
kind is given values of every type (nested past the recursion limit, numbers too large
to convert, bytes that are no text), signed with the run's key or not: the supervisor's
reader (box/channel.read_report) and the host's (grading/report.py) must return, with the
report forged where it is malformed, and never raise.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random

import pytest

from grader.box.channel import read_report
from grader.grading.report import BoxReport, TestReport

KEY = b"k" * 32
DEEP = "[" * 100000 + "]" * 100000
VALUES = [
    None,
    True,
    0,
    -1,
    10**400,
    1.5,
    float("nan"),
    "",
    "passed",
    "call",
    "tests/test_mean.py::test_empty",
    [],
    ["passed"],
    {},
    {"when": "call"},
    [[[[[]]]]],
]
FIELDS = ["t", "id", "when", "outcome", "exit", "what", "s", "xfail", "d", "collected"]
KINDS = ["test", "end", "collect", "integrity", "finding", "start", "other"]


def signed(records: list[str]) -> bytes:
    chain = b""
    out = []
    for body in records:
        mac = hmac.new(KEY, chain + body.encode(), hashlib.sha256).hexdigest()
        chain = mac.encode()
        out.append(body + "\t" + mac)
    return ("\n".join(out) + "\n").encode()


def dumps(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True, ensure_ascii=True, allow_nan=True)


def fuzzed_record(rng: random.Random) -> dict:
    rec = {"t": rng.choice(KINDS), "s": "sess"}
    for field in rng.sample(FIELDS, rng.randint(1, len(FIELDS))):
        rec[field] = rng.choice(VALUES)
    if rng.random() < 0.5:
        rec["s"] = "sess"
    return rec


@pytest.mark.parametrize("seed", range(300))
def test_read_report_never_raises_on_signed_records_of_any_shape(seed):
    rng = random.Random(seed)
    records = [dumps(fuzzed_record(rng)) for _ in range(rng.randint(1, 8))]
    rep = read_report(signed(records), KEY)
    assert isinstance(rep["outcomes"], dict)
    # and whatever it says reads back on the host without raising
    doc = {"report": rep, "exit_code": rng.choice(VALUES), "durations": {"check": rng.choice(VALUES)}}
    box = BoxReport.parse(json.dumps(doc, default=str).encode())
    assert box.report is None or isinstance(box.report, TestReport)


@pytest.mark.parametrize(
    "line",
    [
        DEEP.encode(),
        ("{" + '"a":' * 50000 + "1" + "}" * 50000).encode(),
        b"\xff\xfe\x00garbage\tnot-a-mac",
        b'{"s": "x", "t": "test"}\t' + b"0" * 64,
        b"[1, 2, 3]\t" + b"0" * 64,
        b'"just a string"',
        b"1e999999",
        b'{"s": ' + b"9" * 5000 + b"}",
        b"\t",
    ],
)
def test_an_unsigned_line_of_any_shape_is_forged_never_an_error(line):
    rep = read_report(signed([dumps({"t": "start", "s": "sess"})]) + line + b"\n", KEY)
    assert rep["forged"] and "signature" in rep["forged"]


def test_a_signed_record_nested_past_the_recursion_limit_is_forged():
    body = '{"t": "test", "s": "sess", "id": ' + DEEP + "}"
    rep = read_report(signed([body]), KEY)
    assert rep["forged"]


@pytest.mark.parametrize("seed", range(200))
def test_the_hosts_reader_never_raises_on_any_document_shape(seed):
    rng = random.Random(seed)
    doc = {
        key: rng.choice(VALUES + [{"exit": rng.choice(VALUES)}, {"outcomes": {"a": rng.choice(VALUES)}}])
        for key in rng.sample(
            ["report", "canaries", "durations", "apply", "exit_code", "files", "tree_error", "output", "error"],
            rng.randint(1, 9),
        )
    }
    try:
        text = json.dumps(doc)
    except ValueError:
        return
    BoxReport.parse(text.encode())
