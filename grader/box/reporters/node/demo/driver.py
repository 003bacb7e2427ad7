"""Run one test command the way the supervisor would, and check its signed report.

Inside the container: python3 driver.py LABEL -- CMD ARGS...
A fresh key (32 random bytes + settings JSON) goes into a file that is opened read-only and
unlinked, the report pipe's write end and the key's descriptor are passed to the command
(GRADER_REPORT_FD / GRADER_KEY_FD), the report is read from the pipe and every session's
HMAC chain checked line by line, as grader/box/channel.py's read_report does. Prints one JSON
object: the outcomes, whether the report was forged, the sessions and their ends, and the
command's exit status. Standard library only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading


def check(data: bytes, key: bytes) -> dict:
    rep: dict = {"forged": None, "sessions": 0, "ends": [], "outcomes": {}, "collect_errors": [], "integrity": []}
    chains: dict[str, bytes] = {}
    ended: set[str] = set()
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
        chains[sid] = mac
        if sid in ended:
            rep["forged"] = f"line {n} came after its session's end"
            break
        kind = rec.get("t")
        if kind == "end":
            ended.add(sid)
            rep["ends"].append({"exit": rec["exit"], "collected": rec["collected"]})
        elif kind == "collect":
            rep["collect_errors"].append(rec["id"])
        elif kind == "integrity":
            rep["integrity"].append(rec["what"])
        elif kind == "test":
            key_ = (sid, rec["id"])
            if key_ in rep.setdefault("_seen", set()):
                rep["forged"] = f"line {n} repeats {rec['id']}"
                break
            rep["_seen"].add(key_)
            rep["outcomes"][rec["id"]] = rec["outcome"]
    rep.pop("_seen", None)
    rep["sessions"] = len(chains)
    if not rep["forged"] and len(ended) < len(chains):
        rep["forged"] = f"{len(chains) - len(ended)} session(s) started and never ended"
    return rep


def main() -> int:
    label = sys.argv[1]
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    key = secrets.token_bytes(32)
    fd, path = tempfile.mkstemp(prefix=".grader-key-")
    os.write(fd, key + json.dumps({"repo": os.getcwd()}).encode())
    os.close(fd)
    key_fd = os.open(path, os.O_RDONLY)
    os.unlink(path)
    rep_r, rep_w = os.pipe()
    chunks: list[bytes] = []

    def pump() -> None:
        while True:
            b = os.read(rep_r, 65536)
            if not b:
                return
            chunks.append(b)

    reader = threading.Thread(target=pump)
    reader.start()
    env = dict(os.environ, GRADER_REPORT_FD=str(rep_w), GRADER_KEY_FD=str(key_fd))
    try:
        proc = subprocess.run(cmd, env=env, pass_fds=(rep_w, key_fd), capture_output=True, timeout=120)
        status, out = proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")
    except subprocess.TimeoutExpired as exc:
        status, out = "timeout", str(exc)
    os.close(rep_w)
    os.close(key_fd)
    reader.join(10)
    rep = check(b"".join(chunks), key)
    rep["label"] = label
    rep["key_hex"] = key.hex()  # the demo's key-theft scenario compares it with what the test printed
    rep["exit_status"] = status
    rep["output_tail"] = out[-1500:]
    print(json.dumps(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
