"""grader/runs.py's query filters: read once for the API's routes and the portal's pages."""

from __future__ import annotations

import datetime as dt

import pytest

from grader.runs import FilterError, Filters, parse_filters


def test_filters_are_read_from_a_query_string():
    assert parse_filters({}) == Filters()
    assert parse_filters({"suite": "examples", "variant": "", "since": "2024-01-01", "until": "2024-01-01"}) == Filters(
        suite="examples", variant=None, since=dt.date(2024, 1, 1), until=dt.date(2024, 1, 1)
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ({"since": "yesterday"}, "since must be a date, YYYY-MM-DD, not 'yesterday'"),
        ({"until": "2024-13-01"}, "until must be a date, YYYY-MM-DD, not '2024-13-01'"),
        ({"since": "2024-01-02", "until": "2024-01-01"}, "since is after until"),
    ],
)
def test_unreadable_filters_are_refused_with_the_reason(args, message):
    with pytest.raises(FilterError) as caught:
        parse_filters(args)
    assert str(caught.value) == message
