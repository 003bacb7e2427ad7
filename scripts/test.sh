#!/usr/bin/env bash
# The test command: sets the machine up if needed, checks lint, formatting and types
# (ruff, mypy), then runs every test, the Docker
# and gVisor integration tests included, in two steps: every test but the disruptive
# ones, then the disruptive ones alone (tests marked `disruptive`, which restart what the
# others use, such as dockerd). Extra arguments go to pytest in both steps, so
# `-q`, `-x` or `-k dockerd` work as they would on one run. The second step runs even
# when the first failed; the exit status is the first failure's. A step whose selection
# is empty (pytest's status 5, e.g. `-k dockerd` in the first) is not a failure unless
# both are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the habits first: lint, formatting and types (configured in pyproject.toml); a finding fails the run
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/grader tasks build
main=0
.venv/bin/python -m pytest "$@" || main=$?
echo "scripts/test.sh: the disruptive tests, alone, after the others" >&2
last=0
.venv/bin/python -m pytest --disruptive "$@" || last=$?
if [ "$main" -eq 5 ] && [ "$last" -eq 5 ]; then exit 5; fi
for status in "$main" "$last"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
