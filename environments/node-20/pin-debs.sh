#!/bin/sh
# Print debian-packages.txt: the exact versions apt would install for nodejs and npm (and
# everything they depend on) on grader/base:trixie today. Run on a host that reaches
# deb.debian.org; review the diff before committing it.
set -eu
NODEJS=${NODEJS:-nodejs}
NPM=${NPM:-npm}
echo "# Debian trixie packages for node-20, pinned: nodejs and npm and everything they pull in"
echo "# (apt-get install -s --no-install-recommends $NODEJS $NPM on grader/base:trixie, $(date -u +%F));"
echo "# regenerate with: bash environments/node-20/pin-debs.sh > environments/node-20/debian-packages.txt"
docker run --rm -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro grader/base:trixie \
  sh -c "apt-get update -qq >/dev/null && apt-get install -s --no-install-recommends $NODEJS $NPM" \
  | awk '/^Inst /{gsub(/[()]/,"",$3); print $2"="$3}' | sort
