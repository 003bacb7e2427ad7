#!/usr/bin/env bash
# The main job: set the machine up if needed, start the whole service locally (Redis, the
# REST API under gunicorn, two grading workers; SQLite as the database), make a team key,
# and grade every example task through the REST API: gold patches (PASS), empty patches
# (FAIL), a broken patch (PATCH FAILED), then the gold patches again (answered from the
# cache). Everything it starts is stopped when it ends.
#
#   bash scripts/demo.sh            # the table
#   bash scripts/demo.sh --json     # the same, as JSON
#   bash scripts/demo.sh --local    # grade in-process, without the service
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
GRADER=$PWD/.venv/bin/grader
log() { printf '\033[1;34m[demo]\033[0m %s\n' "$*" >&2; }

if [ "${1:-}" = "--local" ]; then exec "$GRADER" demo "$@"; fi

STATE=$(mktemp -d /tmp/grader-demo.XXXXXX)
free_port() { .venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
REDIS_PORT=$(free_port)
API_PORT=$(free_port)
export GRADER_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
export GRADER_DATABASE_URL="sqlite:///$STATE/grader.db"
export GRADER_API_URL="http://127.0.0.1:$API_PORT"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$STATE"
}
trap cleanup EXIT

log "starting Redis on port $REDIS_PORT, state in $STATE"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$STATE" --save '' --appendonly yes \
  >"$STATE/redis.log" 2>&1 &
pids+=($!)
log "starting the API on $GRADER_API_URL and two workers (logs in $STATE)"
log "(grader serve alone, on 127.0.0.1: for this machine. Wherever others reach it, put nginx in front: grader proxy config)"
"$GRADER" db upgrade >/dev/null
"$GRADER" serve --bind "127.0.0.1:$API_PORT" --workers 2 >"$STATE/api.log" 2>&1 &
pids+=($!)
"$GRADER" worker --count 2 >"$STATE/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 120); do
  curl -fsS "$GRADER_API_URL/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "$GRADER_API_URL/readyz" >/dev/null || { log "the service did not become ready:"; tail -20 "$STATE"/*.log; exit 1; }
GRADER_API_KEY=$("$GRADER" keys create demo-team)
export GRADER_API_KEY
log "service ready; submitting through the REST API as team demo-team"
status=0
"$GRADER" demo "$@" || status=$?
if [ "$status" != 0 ]; then log "demo failed; the service's logs:"; tail -30 "$STATE"/*.log; fi
exit "$status"
