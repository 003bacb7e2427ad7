"""The order a tier's files start in under pytest-xdist (`--dist loadfile
--no-loadscope-reorder`, scripts/test.sh): longest first, by each file's seconds measured in
one run of the tier, so that no long file is left for the end while the other workers stand
idle. pytest-xdist's own order is by number of tests, which puts a file of a few long tests
last."""

from __future__ import annotations

from collections.abc import Mapping

import pytest


def longest_first(items: list[pytest.Item], folder: str, seconds: Mapping[str, int]) -> None:
    """Sorts `items` in place: the files under tests/`folder` by their `seconds`, longest first
    (a file not named there after them); each file's tests, and every other item, keep their
    order."""
    items.sort(key=lambda item: -seconds.get(item.path.name, 0) if folder in item.path.parts else 0)
