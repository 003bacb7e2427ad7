import math

import pytest

from grader.metrics import file_localization, normalize_text, pass_at_k, similarity


def test_file_localization_by_hand():
    # patch {a, b, c}, gold {a, d}: 1 hit; P = 1/3, R = 1/2, F1 = 2PR/(P+R) = 0.4
    p, r, f1 = file_localization(["a", "b", "c"], ["a", "d"])
    assert p == pytest.approx(1 / 3) and r == pytest.approx(0.5) and f1 == pytest.approx(0.4)


def test_file_localization_edges():
    assert file_localization([], ["a"]) == (None, 0.0, None)
    assert file_localization(["a"], []) == (0.0, None, None)
    assert file_localization(["x"], ["y"]) == (0.0, 0.0, 0.0)
    assert file_localization(["a", "a"], ["a"]) == (1.0, 1.0, 1.0)


def test_similarity():
    assert similarity("abc", "abc") == 1.0
    assert similarity("", "abc") == 0.0
    # SequenceMatcher: 2*M/T with M=3 matches ("abc") and T=7 characters
    assert similarity("abcd", "abc") == pytest.approx(6 / 7)


def test_similarity_has_no_autojunk_cliff():
    long = "a" * 300 + "b"
    assert similarity(long, "a" * 300) > 0.99


def test_normalize():
    assert normalize_text("a \r\nb\t\r\n\r\n", line_endings=True, trailing_whitespace=True) == "a\nb\n"
    assert normalize_text("a\r\n", line_endings=True, trailing_whitespace=False) == "a\n"
    assert normalize_text("a \n", line_endings=False, trailing_whitespace=False) == "a \n"


def test_pass_at_k_by_hand():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(5, 1, 5) == 1.0


def test_pass_at_k_is_stable_for_large_n():
    v = pass_at_k(10_000, 1, 10)
    assert v == pytest.approx(1 - math.comb(9999, 10) / math.comb(10_000, 10))


def test_pass_at_k_rejects_nonsense():
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 5)
