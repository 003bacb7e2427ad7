#!/usr/bin/env bash
# The test command: sets the machine up if needed, checks lint, formatting and types
# (ruff, mypy), then runs the tests tier by tier (tests/README.md), each tier's folder
# one pytest run:
#
#   unit     tests/unit      needs nothing; runs first, with -x: a failure stops the whole run there
#   service  tests/service   Redis, PostgreSQL, gunicorn; three pytest-xdist workers, a file to a worker
#   docker   tests/docker    the Docker engine, gVisor included; three workers (GRADER_TEST_DOCKER_WORKERS=0: serial)
#   browser  tests/browser   headless Chromium; two workers
#   the disruptive tests alone, last (marked `disruptive`: they restart what the others use, dockerd)
#
# Extra arguments are pytest options and go to every step, so `-q`, `-x` or `-k dockerd`
# work as they would on one run (a step's own options come first: `-n 0` turns a step's
# workers off). To run some files, call pytest on them. After the unit tier every step
# runs even when one before it failed; the exit status is the first failure's. A step
# whose selection is empty (pytest's status 5, e.g. `-k dockerd` in all but the last) is
# not a failure unless every step's is.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  if [[ $arg != -* && -e ${arg%%::*} ]]; then
    echo "scripts/test.sh: $arg: the steps run whole tiers; to run some files: .venv/bin/python -m pytest $arg" >&2
    exit 2
  fi
done
bash scripts/setup.sh
# The images the docker tier grades in, built in the background while the tiers before it
# (which need no Docker) run: the example and language tasks' instance images, then every
# real suite (downloaded, written to build/SUITE, its instance images built; cached by
# content hash, so a second run builds nothing). The docker tier waits for it; a suite
# that failed to build here is built again by its own test, which then says why.
prebuild_log=$(mktemp -t grader-prebuild.XXXXXX)
(
  .venv/bin/grader tasks build || echo "prebuild: grader tasks build failed"
  for manifest in tasks/*/manifest.toml; do
    suite=$(basename "$(dirname "$manifest")")
    start=$SECONDS
    .venv/bin/python tasks/releases.py "$suite" >/dev/null || echo "prebuild: $suite failed"
    echo "prebuild: $suite in $((SECONDS - start)) s"
  done
) >"$prebuild_log" 2>&1 &
prebuild=$!
trap 'kill "$prebuild" 2>/dev/null || true' EXIT  # a run that stops early stops it too
# the habits first: lint, formatting and types (configured in pyproject.toml); a finding fails the run
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

statuses=()
step() {  # step NAME PYTEST-ARGS...: one pytest run, its status kept in `statuses`
  local name=$1 status=0
  shift
  echo "scripts/test.sh: $name" >&2
  local start=$SECONDS
  .venv/bin/python -m pytest "$@" || status=$?
  echo "scripts/test.sh: $name: exit status $status, $((SECONDS - start)) s" >&2
  statuses+=("$status")
  return "$status"
}

step "the unit tier (tests/unit), failing fast" tests/unit -x -n 2 "$@" || {
  status=$?
  if [ "$status" -ne 5 ]; then
    echo "scripts/test.sh: the unit tier failed: the other tiers are not run" >&2
    exit "$status"
  fi
}
# each tier's files longest first (its conftest.py), not by their number of tests
step "the service tier (tests/service)" tests/service -n 3 --dist loadfile --no-loadscope-reorder "$@" || true
start=$SECONDS
wait "$prebuild" || echo "scripts/test.sh: building the images in the background failed" >&2
echo "scripts/test.sh: the images were ready $((SECONDS - start)) s after the tiers before them" >&2
grep '^prebuild:' "$prebuild_log" >&2 || tail -20 "$prebuild_log" >&2
step "the docker tier (tests/docker)" tests/docker -n "${GRADER_TEST_DOCKER_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "$@" || true
step "the browser tier (tests/browser)" tests/browser -n 2 --dist loadfile "$@" || true
step "the disruptive tests, alone, after the others" --disruptive "$@" || true

every5=1
for status in "${statuses[@]}"; do
  if [ "$status" -ne 5 ]; then every5=0; fi
done
if [ "$every5" -eq 1 ]; then exit 5; fi
for status in "${statuses[@]}"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
