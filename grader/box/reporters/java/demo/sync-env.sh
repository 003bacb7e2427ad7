#!/bin/sh
# Copies the reporter's sources into the java-21 environment's build context (the
# environment image compiles them: `grader env build` sends only the environment's
# directory). Run after changing anything under src/ or build.sh; the demo checks the copy.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)  # the reporter (this script is in its demo/)
env=$here/../../../../environments/java-21/reporter
rm -rf "$env"
mkdir -p "$env"
cp -r "$here/src" "$here/build.sh" "$env/"
