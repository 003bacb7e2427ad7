"""Build-time check of the patched GOROOT: a test binary run with a report pipe and a key
descriptor writes the signed records the grader expects, and none without them."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile

binary = sys.argv[1]
key = os.urandom(32)
with tempfile.TemporaryFile() as f:
    f.write(key + b"{}")
    f.flush()
    key_fd = os.dup(f.fileno())
r, w = os.pipe()
env = dict(os.environ, GRADER_REPORT_FD=str(w), GRADER_KEY_FD=str(key_fd))
proc = subprocess.run([binary, "-test.v"], env=env, pass_fds=(w, key_fd), capture_output=True)
os.close(w)
data = b""
while chunk := os.read(r, 65536):
    data += chunk
prev, records = b"", []
for line in data.decode().splitlines():
    body, mac = line.rsplit("\t", 1)
    want = hmac.new(key, prev + body.encode(), hashlib.sha256).hexdigest()
    assert hmac.compare_digest(want, mac), f"bad signature: {line}"
    prev = mac.encode()
    records.append(json.loads(body))
got = {r["id"]: r["outcome"] for r in records if r["t"] == "test"}
want = {"TestPass": "passed", "TestFail": "failed", "TestSkip": "skipped", "TestSub/a_b": "passed", "TestSub": "passed"}
assert records[0]["t"] == "start" and records[-1] == {**records[-1], "t": "end", "exit": 1, "collected": 5}, records
assert got == want, got
assert {r["pkg"] for r in records if r["t"] == "test"} == {"grader.invalid/selftest"}, records
assert proc.returncode == 1, proc.returncode
plain = subprocess.run([binary], capture_output=True, pass_fds=(key_fd,))
assert plain.returncode == 1, plain.returncode
print(f"selftest: {len(records)} signed records, as expected")
