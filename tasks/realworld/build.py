"""Build the real-world suite from pinned releases on PyPI (tasks/realworld/README.md).

The builder is the one every release suite shares (tasks/releases.py); this file keeps
the suite's own names for it (its tests, scripts/build-realworld.sh and the README use
them):

    .venv/bin/python tasks/realworld/build.py                  # download, write build/realworld, build the images
    .venv/bin/python tasks/realworld/build.py --no-images      # only the task directories
    .venv/bin/python tasks/realworld/build.py --compute [ID..] # run the tests again and rewrite lists.json
    .venv/bin/python tasks/realworld/build.py pin NAME VERSION # print a manifest entry for a release
    .venv/bin/grader tasks validate --tasks-dir build/realworld --repeat 3
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import releases  # noqa: E402
from releases import SUITE_YAML, difficulty  # noqa: E402,F401

ROOT = HERE.parent.parent
SUITE = releases.Suite("realworld", HERE, ROOT / "build" / "realworld", Path(__file__))
DEFAULT_OUT = SUITE.out
FILES_HOST = releases.PYPI_FILES


def load_manifest() -> releases.Manifest:
    return SUITE.manifest()


def load_lists() -> dict:
    return SUITE.lists()


def build_suite(out: Path, **kw) -> tuple[releases.Manifest, bool]:
    return SUITE.build(out, **kw)


def build_images(out: Path, log=print) -> None:
    SUITE.build_images(out, log=log)


if __name__ == "__main__":
    sys.exit(SUITE.main())
