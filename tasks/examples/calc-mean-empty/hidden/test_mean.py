import pytest

from calc import mean


def test_empty_raises():
    with pytest.raises(ValueError):
        mean([])


def test_mean_values():
    assert mean([2, 4]) == 3
    assert mean([1.5]) == 1.5
