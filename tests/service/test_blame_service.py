"""Whose fault an ERROR is (grader/blame.py), on a real Redis: the gold cache and the
service-wide retry budget. The decisions as pure logic are tests/unit/test_blame.py; the
same decisions end to end, in Docker through the queue, tests/docker/test_blame_docker.py."""

from __future__ import annotations

import pytest
from redis import Redis

from grader import blame
from grader.blame import GoldAnswer, GoldCache, RetryBudget, gold_answer
from grader.verdict import Provenance, Result, Verdict

SHA, GOLD_SHA = "a" * 64, "g" * 64


def error_result(image_id: str | None = "sha256:img", error: str = "supervisor: bad report\ntraceback...") -> Result:
    return Result(
        task_id="t",
        verdict=Verdict.ERROR,
        explanation="The grading machinery failed",
        error=error,
        provenance=Provenance(patch_sha256=SHA, task_hash="th", image_id=image_id, grader_version="v"),
        durations={"total": 1.5},
    )


def gold_result(verdict: Verdict = Verdict.PASS, sha: str = GOLD_SHA) -> dict:
    return Result(
        task_id="t",
        verdict=verdict,
        explanation="gold",
        error=None if verdict is not Verdict.ERROR else "x",
        provenance=Provenance(
            patch_sha256=sha, task_hash="th", image_id="sha256:img", grader_version="v", runtime="runc"
        ),
    ).model_dump(mode="json")


# --- the gold cache --------------------------------------------------------------------------
@pytest.fixture
def cache(redis_url) -> GoldCache:
    return GoldCache(Redis.from_url(redis_url), "test:gold:", ttl=300)


class Grades:
    def __init__(self, verdict=Verdict.PASS, at=2000.0):
        self.verdict, self.at, self.count = verdict, at, 0

    def __call__(self) -> GoldAnswer:
        self.count += 1
        return GoldAnswer(verdict=self.verdict, at=self.at + self.count, result=gold_result(self.verdict))


@pytest.mark.service  # a real Redis
def test_a_flood_grades_the_gold_once(cache):
    grades = Grades(Verdict.PASS, at=2000.0)
    # a thousand ERRORing submissions of one task, all failing since before the gold's grade
    answers = [gold_answer(cache, "k", grades, since=1500.0 + i * 0.1) for i in range(1000)]
    assert grades.count == 1 and all(a.clean for a in answers)
    assert [a.cached for a in answers[:2]] == [False, True]
    assert 0 < cache.redis.ttl("test:gold:k") <= 300


@pytest.mark.service  # a real Redis
def test_a_pass_older_than_the_first_error_is_graded_again(cache):
    grades = Grades(Verdict.PASS, at=2000.0)
    gold_answer(cache, "k", grades, since=None)
    # the submission began failing after that gold grade: an outage may have begun between
    again = gold_answer(cache, "k", grades, since=2500.0)
    assert grades.count == 2 and not again.cached
    assert gold_answer(cache, "k", grades, since=None).cached  # an answer that cannot charge takes any


@pytest.mark.service  # a real Redis
def test_a_cached_error_holds_whatever_the_first_error(cache):
    grades = Grades(Verdict.ERROR, at=2000.0)
    gold_answer(cache, "k", grades, since=None)
    later = gold_answer(cache, "k", grades, since=9999.0)
    assert grades.count == 1 and later.cached and later.verdict is Verdict.ERROR
    assert blame.known_broken(cache, "k") is not None  # the breaker is open for this key
    assert blame.known_broken(cache, "other") is None and blame.known_broken(cache, None) is None


@pytest.mark.service  # a real Redis
def test_the_breaker_is_not_opened_by_a_passing_gold(cache):
    gold_answer(cache, "k", Grades(Verdict.PASS), since=None)
    assert blame.known_broken(cache, "k") is None


@pytest.mark.service  # a real Redis
def test_ttl_zero_grades_every_time(redis_url):
    cache = GoldCache(Redis.from_url(redis_url), "test:gold:", ttl=0)
    grades = Grades()
    gold_answer(cache, "k", grades, since=None)
    gold_answer(cache, "k", grades, since=None)
    assert grades.count == 2


# --- the service-wide retry budget -----------------------------------------------------------
@pytest.mark.service  # a real Redis
def test_the_retry_budget_is_shared_and_per_window(redis_url):
    now = [1000.0]
    a = RetryBudget(Redis.from_url(redis_url), "test:budget:", budget=3, window=60, clock=lambda: now[0])
    b = RetryBudget(Redis.from_url(redis_url), "test:budget:", budget=3, window=60, clock=lambda: now[0])
    assert [a.take(), b.take(), a.take(), b.take(), a.take()] == [True, True, True, False, False]
    now[0] += 60  # the next window
    assert b.take()
