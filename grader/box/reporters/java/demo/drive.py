#!/usr/bin/env python3
"""A stand-in for the grader's supervisor, for the demo and for measuring tasks: runs a
command as uid 1000 with the report channel of CONTRACT.md (a pipe, a key in a deleted
root-only file), then checks every record's chained HMAC and folds the outcomes.

    python3 drive.py [--uid 1000] [--out FILE] -- COMMAND [ARG...]     (as root, in the image)

Prints one JSON object: the command's exit status, the sessions, the `end` record(s), the
outcome of every test id, collect errors, integrity notes, and `forged` (the first line that
did not verify, a repeated test, a record after `end`), then `tampered` reasons the way the
grader decides them: a session without an end, an end whose exit status is not the
command's. Standard library only.
"""

import hashlib
import hmac
import json
import os
import secrets
import sys
import tempfile


def verify(data: bytes, key: bytes) -> dict:
    rep = {
        "forged": None,
        "sessions": 0,
        "ends": [],
        "outcomes": {},
        "collect_errors": [],
        "integrity": [],
        "unended": [],
    }
    chains, ended, started = {}, set(), []
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line:
            continue
        body, _, mac = line.rpartition(b"\t")
        try:
            rec = json.loads(body)
            sid = str(rec["s"])
        except (ValueError, KeyError, TypeError):
            rep["forged"] = f"line {n} is not a signed record: {line[:80]!r}"
            break
        want = hmac.new(key, chains.get(sid, b"") + body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(want, mac):
            rep["forged"] = f"line {n} does not carry this run's signature: {line[:80]!r}"
            break
        if sid not in chains:
            started.append(sid)
        chains[sid] = mac
        if sid in ended:
            rep["forged"] = f"line {n} came after its session's end"
            break
        kind = rec.get("t")
        if kind == "end":
            ended.add(sid)
            rep["ends"].append(rec)
        elif kind == "collect":
            rep["collect_errors"].append(rec["id"])
        elif kind == "integrity":
            rep["integrity"].append(rec.get("what"))
        elif kind == "test":
            if rec["id"] in rep["outcomes"]:
                rep["forged"] = f"line {n} repeats the test {rec['id']}"
                break
            rep["outcomes"][rec["id"]] = rec["outcome"]
    rep["sessions"] = len(chains)
    rep["unended"] = [s for s in started if s not in ended]
    return rep


def main() -> int:
    argv = sys.argv[1:]
    uid, out = 1000, None
    while argv[:1] in (["--uid"], ["--out"]):
        if argv[0] == "--uid":
            uid = int(argv[1])
        else:
            out = argv[1]
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    key = secrets.token_bytes(32)
    fd, path = tempfile.mkstemp(prefix=".grader-key-")
    os.write(fd, key + json.dumps({"tests": []}).encode())
    os.close(fd)
    key_fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    rep_r, rep_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rep_r)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        os.set_inheritable(rep_w, True)
        os.set_inheritable(key_fd, True)
        env = dict(os.environ, GRADER_REPORT_FD=str(rep_w), GRADER_KEY_FD=str(key_fd), HOME="/tmp")
        os.execvpe(argv[0], argv, env)
    os.close(rep_w)
    os.close(key_fd)
    chunks = []
    while True:
        b = os.read(rep_r, 65536)
        if not b:
            break
        chunks.append(b)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    rep = verify(b"".join(chunks), key)
    rep["exit"] = code
    rep["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 1)  # the command and its children
    tampered = []
    if rep["forged"]:
        tampered.append(rep["forged"])
    if rep["unended"]:
        tampered.append(f"{len(rep['unended'])} session(s) started and never ended")
    for end in rep["ends"]:
        if end.get("exit") != code:
            tampered.append(f"the report's exit status {end.get('exit')} is not the command's {code}")
    if rep["integrity"]:
        tampered += [f"integrity: {w}" for w in rep["integrity"]]
    rep["tampered"] = tampered
    text = json.dumps(rep, indent=1, sort_keys=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
