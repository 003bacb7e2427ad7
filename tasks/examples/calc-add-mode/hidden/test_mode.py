import pytest

from calc import mode


def test_most_common():
    assert mode([1, 2, 2, 3]) == 2


def test_tie_takes_the_smallest():
    assert mode([3, 1, 3, 1]) == 1


def test_empty_raises():
    with pytest.raises(ValueError):
        mode([])
