#!/usr/bin/env bash
# The main job: sets the machine up if needed, then grades every example task's gold
# patch and the empty patch in real containers and prints the verdict table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/grader demo "$@"
