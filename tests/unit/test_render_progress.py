"""A batch's progress off a terminal (grader/cli/render.py: LineProgress): a line at every
tenth of the way and at least every 30 seconds, and where it stopped if it did not end."""

from __future__ import annotations

from grader.cli.render import LineProgress


def test_a_line_every_tenth_and_every_30_seconds(capsys):
    now = [0.0]
    bar = LineProgress(clock=lambda: now[0])
    with bar:
        job = bar.add_task("grading", total=100)
        for n in range(1, 101):
            now[0] += 0.1 if n != 55 else 40.0  # one long wait between the 54th and 55th verdict
            bar.advance(job)
    lines = capsys.readouterr().err.splitlines()
    done = [int(line.split(": ")[1].split(" of ")[0]) for line in lines]
    assert done == [0, 10, 20, 30, 40, 50, 55, 60, 70, 80, 90, 100]  # 55: 30 s passed without a tenth
    assert lines[-1].startswith("grading: 100 of 100 done (100%)")


def test_a_batch_that_stops_short_says_where(capsys):
    bar = LineProgress(clock=lambda: 0.0)
    with bar:
        job = bar.add_task("grading", total=10)
        bar.advance(job)
    assert capsys.readouterr().err.splitlines()[-1].startswith("grading: 1 of 10 done (10%)")
