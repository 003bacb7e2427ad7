"""The java-21 environment's class-data-sharing archives (environments/java-21/cds-train) fit
the JVMs the junit runner starts (grader/box/runners/junit.py) and the baseline's of
benchmarks/overhead.py: with -Xshare:on a JVM that cannot map its archive refuses to start, so
each JVM below starts only if the archive was made by this image's JDK for the start of the
class path it is given. A class path that drifted apart (a jar put in the middle of the
runner's list, a JDK the archive was not made by) would make the JVM read every jar again, in
silence, at every grade: this test says so instead."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from grader.box.runners import junit
from grader.config import get_settings
from grader.images import Images

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def java_image(tmp_path_factory) -> str:
    settings = get_settings(
        tasks_dir=tmp_path_factory.mktemp("tasks"),
        environments_dir=ROOT / "environments",
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    return Images(settings).build_env("java-21")


def jvm(image: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """argv in the image as the unprivileged user, no network."""
    return subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--user", "1000:1000", image, *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


def launcher(image: str, classpath: list[str], *share: str, graded: bool = True) -> subprocess.CompletedProcess[str]:
    """The launcher's JVM with the runner's options (graded) or a developer's, its class path
    `classpath`: -version."""
    options = ["-XX:+DisableAttachMechanism", *junit.JVM_FAST, *share]
    if graded:
        options += ["--module-path", f"{junit.REPORTER_JARS}/grader-report.jar", "--add-modules", "grader.report"]
        options += ["--add-opens", "java.base/java.io=grader.report"]
    return jvm(image, "java", *options, "-cp", os.pathsep.join(classpath), "-version")


def runner_classpath() -> list[str]:
    listener = f"{junit.REPORTER_JARS}/grader-junit-listener.jar"
    return [*(f"{junit.JAVA_SHARE}/{j}" for j in junit.RUNNER_JARS), listener]


def test_the_runners_jvms_map_the_images_archives(java_image):
    archive = f"{junit.CDS}/launcher.jsa"
    run = launcher(java_image, runner_classpath(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}")
    assert run.returncode == 0, run.stdout + run.stderr
    # and a developer's bare run of the same launcher (benchmarks/overhead.py's baseline)
    bare = runner_classpath()[:-1]
    run = launcher(java_image, bare, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", graded=False)
    assert run.returncode == 0, run.stdout + run.stderr
    javac = [f"-J{o}" for o in [*junit.JVM_FAST, "-Xshare:on", f"-XX:SharedArchiveFile={junit.CDS}/javac.jsa"]]
    run = jvm(java_image, "javac", *javac, "-version")
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_class_path_other_than_the_archives_is_refused_under_xshare_on(java_image):
    """What the test above stands on: -Xshare:on does refuse an archive that does not fit."""
    archive = f"{junit.CDS}/launcher.jsa"
    run = launcher(java_image, runner_classpath()[1:], "-Xshare:on", f"-XX:SharedArchiveFile={archive}")
    assert run.returncode != 0
    assert "shared" in (run.stdout + run.stderr).lower()
    # and without -Xshare:on, with the runner's own options, the same JVM starts (reading the jars), quietly
    quiet = ["-XX:SharedArchiveFile=" + archive, *junit.CDS_QUIET]
    run = launcher(java_image, runner_classpath()[1:], *quiet)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "cds" not in (run.stdout + run.stderr).lower()
