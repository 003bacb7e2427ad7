"""Grading shaped like a harness: a pure spec step (spec.py: task -> the container's job),
the runners (grader/box/runners/: one module each, registered by name), the in-container
half shipped as one archive (ship.py), a typed report back from the container
(report.py), a pure decision (decide.py) and one pure adjudication of faults
(adjudicate.py). grader/pipeline.py drives them; the service's caches and budgets live
with the service, not here."""
