#!/usr/bin/env bash
# The real-world suite (tasks/realworld/README.md): set the machine up if needed, download
# the pinned sdists from PyPI (cached under the grader cache directory), write the task
# directories to build/realworld and build their instance images. Nothing is rebuilt
# when nothing changed.
#
#   bash scripts/build-realworld.sh                 # build (a few minutes the first time, seconds after)
#   bash scripts/build-realworld.sh --validate      # then: gold PASS, empty FAIL, 3 times each
#   bash scripts/build-realworld.sh --validate 1    # the same, once each
#   bash scripts/build-realworld.sh --force         # other options go to tasks/realworld/build.py
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --validate)
      repeat=3
      if [[ "${2:-}" =~ ^[0-9]+$ ]]; then repeat=$2; shift; fi ;;
    *) args+=("$1") ;;
  esac
  shift
done
bash scripts/setup.sh
.venv/bin/python tasks/realworld/build.py "${args[@]}"
if [ -n "$repeat" ]; then
  exec .venv/bin/grader tasks validate --tasks-dir build/realworld --repeat "$repeat"
fi
