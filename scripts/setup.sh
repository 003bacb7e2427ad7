#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: system packages, a running Docker
# engine (with gVisor's runsc registered as a runtime), the project's virtualenv,
# the offline base image and the example environments.
#
#   bash scripts/setup.sh            # everything
#   GRADER_SKIP_IMAGES=1 bash ...    # system + venv only
#
# Safe to run again: every step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${GRADER_VENV:-$ROOT/.venv}
log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
command -v runsc >/dev/null || need_pkgs+=(runsc)
command -v git >/dev/null || need_pkgs+=(git)
command -v redis-server >/dev/null || need_pkgs+=(redis-server)
command -v curl >/dev/null || need_pkgs+=(curl)
# the attack tests build a native extension module for the container's Python 3.11
command -v gcc >/dev/null || need_pkgs+=(gcc)
[ -f /usr/include/python3.11/Python.h ] || need_pkgs+=(python3.11-dev)
# the portal's browser tests drive headless Chromium through Debian's chromedriver
command -v chromium >/dev/null || need_pkgs+=(chromium)
command -v chromedriver >/dev/null || need_pkgs+=(chromium-driver)
# Debian keeps the PostgreSQL server binaries off the PATH. The tests start their own
# cluster on a free port; the one the package may start on 5432 is left alone, unused.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_pkgs+=(postgresql)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# nginx, the buffering proxy a deployment puts in front of `grader serve` (grader proxy
# config); the tests and benchmarks start their own from that configuration, on free
# ports. The package's own server (its default site on port 80) is not started: Debian's
# policy-rc.d answer 101 ("not allowed") keeps the package from starting it.
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  log "installing nginx (not started)"
  as_root apt-get update -qq
  if [ -e /usr/sbin/policy-rc.d ]; then
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx >/dev/null
  else
    printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
    as_root chmod 755 /usr/sbin/policy-rc.d
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq nginx >/dev/null || { as_root rm -f /usr/sbin/policy-rc.d; exit 1; }
    as_root rm -f /usr/sbin/policy-rc.d
  fi
fi

# gVisor as an optional runtime. ptrace works everywhere (no KVM needed here).
if command -v runsc >/dev/null && ! grep -q runsc /etc/docker/daemon.json 2>/dev/null; then
  log "registering runsc (gVisor) as a Docker runtime"
  as_root mkdir -p /etc/docker
  as_root tee /etc/docker/daemon.json >/dev/null <<JSON
{
  "runtimes": {
    "runsc": {"path": "$(command -v runsc)", "runtimeArgs": ["--platform=ptrace", "--network=none"]}
  }
}
JSON
  if docker info >/dev/null 2>&1; then as_root kill -HUP "$(pidof dockerd)" || true; sleep 1; fi
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    as_root systemctl start docker
  else
    as_root sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/dockerd.log"; exit 1; }
fi

if [ ! -x "$VENV/bin/grader" ] || [ pyproject.toml -nt "$VENV/.installed" ]; then
  log "creating the virtualenv in $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e ".[dev]"
  touch "$VENV/.installed"
fi

if [ -z "${GRADER_SKIP_IMAGES:-}" ]; then
  log "building base images and environments (cached by content hash)"
  "$VENV/bin/grader" env build --jobs "${GRADER_ENV_BUILD_JOBS:-2}"
fi
log "ready"
