"""An automake test driver that runs nothing: it records the test for the launcher.

`make check LOG_DRIVER="python3 .../am_record_driver.py"` (and each `<EXT>_LOG_DRIVER`) calls it
once per test, as automake's parallel harness calls `test-driver`:

    am_record_driver.py --test-name NAME --log-file F.log --trs-file F.trs \
        [--expect-failure yes|no] [--enable-hard-errors yes|no] [--color-tests ...] \
        [--collect-skipped-logs ...] -- COMMAND...

It appends one JSON line (name, command, working directory, environment, expect-failure,
hard-errors) to the file named by GRADER_AM_LIST, and writes the .log and a .trs saying SKIP so
that `make check` finishes without running any test. The launcher (ctest_launcher.py
--automake) then runs each recorded command itself. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i].startswith("--") and i + 1 < len(argv):
            opts[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            i += 1
    command = argv[i + 1 :]
    listing = os.environ.get("GRADER_AM_LIST")
    if not listing or "test-name" not in opts or not command:
        print("am_record_driver: needs GRADER_AM_LIST, --test-name and a command", file=sys.stderr)
        return 2
    record = {
        "name": opts["test-name"],
        "command": command,
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if not k.startswith("GRADER_")},
        "expect_failure": opts.get("expect-failure", "no") == "yes",
        "hard_errors": opts.get("enable-hard-errors", "yes") != "no",
    }
    with open(listing, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
    for key, text in (
        ("log-file", ""),
        ("trs-file", ":test-result: SKIP\n:global-test-result: SKIP\n:recheck: no\n:copy-in-global-log: no\n"),
    ):
        if key in opts:
            with open(opts[key], "w") as f:
                f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
