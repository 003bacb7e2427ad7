#!/usr/bin/env bash
# Build the grader service image (the top-level Dockerfile) on this machine, with the
# classic builder and no registry.
#
#   bash scripts/build-service-image.sh [TAG]      # default grader/service:local
#
# GRADER_SERVICE_BASE  the base image (default grader/base:bookworm, bootstrapped with
#                      `grader images bootstrap` when missing)
# GRADER_CA_BUNDLE     PEM bundle for pip behind a TLS-intercepting proxy (default: the
#                      host's /etc/ssl/certs/ca-certificates.crt when present; empty for none)
#
# The context is a temporary copy of what the image needs, with the CA bundle added to
# it as grader-ca.crt, so nothing is written into the repository. An unchanged rebuild
# reuses every layer (the classic builder's file checksums ignore modification times).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TAG=${1:-grader/service:local}
BASE=${GRADER_SERVICE_BASE:-grader/base:bookworm}
VENV=${GRADER_VENV:-$ROOT/.venv}
log() { printf '\033[1;34m[service-image]\033[0m %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  case $BASE in
    grader/base:*)
      [ -x "$VENV/bin/grader" ] || die "$BASE is missing and $VENV/bin/grader is not installed (run scripts/setup.sh)"
      log "bootstrapping $BASE"
      "$VENV/bin/grader" images bootstrap "${BASE#grader/base:}" ;;
    *) log "$BASE is not here; the build will try to pull it" ;;
  esac
fi

# The same rule as grader/config.py: unset means the host bundle, empty means none.
if [ -n "${GRADER_CA_BUNDLE+set}" ]; then
  CA=$GRADER_CA_BUNDLE
elif [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  CA=/etc/ssl/certs/ca-certificates.crt
else
  CA=
fi
if [ -n "$CA" ] && [ ! -f "$CA" ]; then
  die "the CA bundle $CA (GRADER_CA_BUNDLE) does not exist"
fi

CTX=$(mktemp -d "${TMPDIR:-/tmp}/grader-service-context.XXXXXX")
trap 'rm -rf "$CTX"' EXIT
tar -C "$ROOT" -cf - --exclude=__pycache__ --exclude='*.py[co]' --exclude='*.egg-info' \
    Dockerfile .dockerignore pyproject.toml README.md grader environments tasks | tar -C "$CTX" -xf -
if [ -n "$CA" ]; then
  install -m 644 "$CA" "$CTX/grader-ca.crt"
fi

log "building $TAG from $BASE${CA:+ (CA bundle $CA)}"
DOCKER_BUILDKIT=0 docker build --force-rm --build-arg BASE="$BASE" -t "$TAG" "$CTX"
log "built $TAG $(docker image inspect --format '{{.Id}}' "$TAG" | cut -c8-19)"
