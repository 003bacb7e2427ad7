#!/bin/sh
# Builds the two jars of the JUnit reporter into DEST (default: /usr/share/grader-java):
#   grader-report.jar           the named module grader.report (the channel: key, HMAC chain)
#   grader-junit-listener.jar   the TestExecutionListener, registered through ServiceLoader
#   SOURCES                     the sha256 of every file they were built from (src/, build.sh):
#                               the junit runner uses these jars only when the reporter it ships
#                               has the same files, and builds its own otherwise
# Needs a JDK 21 and Debian's junit5 jars (/usr/share/java). Run at environment build time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-/usr/share/grader-java}
j=/usr/share/java
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest" "$work/report" "$work/listener"
javac -J-XX:TieredStopAtLevel=1 --release 21 -Xlint:all -Werror -d "$work/report" \
    "$here/src/grader.report/module-info.java" "$here"/src/grader.report/grader/report/*.java
jar --create --file "$dest/grader-report.jar" -C "$work/report" .
javac -J-XX:TieredStopAtLevel=1 --release 21 -Xlint:all,-path -d "$work/listener" \
    --module-path "$dest/grader-report.jar" --add-modules grader.report \
    -cp "$j/junit-platform-launcher.jar:$j/junit-platform-engine.jar:$j/junit-platform-commons.jar:$j/apiguardian-api.jar:$j/opentest4j.jar" \
    "$here"/src/listener/grader/junit/*.java
cp -r "$here/src/listener/META-INF" "$work/listener/"
jar --create --file "$dest/grader-junit-listener.jar" -C "$work/listener" .
(cd "$here" && find src build.sh -type f | LC_ALL=C sort | xargs sha256sum) > "$dest/SOURCES"
chmod 0444 "$dest"/grader-report.jar "$dest"/grader-junit-listener.jar "$dest/SOURCES"
