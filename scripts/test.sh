#!/usr/bin/env bash
# The test command: sets the machine up if needed, then runs every test, the Docker
# and gVisor integration tests included. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/grader tasks build
exec .venv/bin/python -m pytest "$@"
