"""Start the JUnit JVM with the report channel in system properties, not in its environment.

Run by the junit runner (grader/box/runners/junit.py) as the unprivileged user, from a
root-owned copy of this directory:

    python3 -I launch.py /path/to/java JVM-ARG... MAIN-CLASS ARG...

A JVM cannot remove a variable from its own environment (System.getenv() is a copy, and
ProcessBuilder gives children that copy), so the descriptors move here, before the JVM
exists: GRADER_REPORT_FD and GRADER_KEY_FD become -Dgrader.report.fd / -Dgrader.key.fd
(grader.report.Channel reads them, then clears them), and they, with the variables the JVM
reads by itself (JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, _JAVA_OPTIONS, CLASSPATH), leave the
environment the JVM and its children get. The descriptors stay open across the exec.
"""

from __future__ import annotations

import os
import sys

CHANNEL = {"GRADER_REPORT_FD": "grader.report.fd", "GRADER_KEY_FD": "grader.key.fd"}
JVM_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "CLASSPATH", "JDK_JAVAC_OPTIONS")


def main(argv: list[str]) -> int:  # returns only when it cannot start the JVM
    if not argv or not os.path.isabs(argv[0]):
        print("launch.py: the first argument is the java binary, by absolute path", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if k not in JVM_ENV}
    props = []
    for variable, prop in CHANNEL.items():
        value = env.pop(variable, "")
        if value.isdigit():
            props.append(f"-D{prop}={value}")
    os.execve(argv[0], [argv[0], *props, *argv[1:]], env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
