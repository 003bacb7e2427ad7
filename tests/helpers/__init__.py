"""What the tests share that is not a fixture, imported as `helpers.<module>` (tests/ is
on sys.path: pytest puts the root conftest's directory there).

- `mini`: the mini task's repository and definition (the hostile patches are made against it)
- `servers`: real Redis and PostgreSQL servers, started by the tests themselves
- `service`: a Handles over a test's database and Redis, the Flask test client's wrapper,
  the service as real processes (`Stack`), the fault tests' `Ledger`, an in-process RQ worker
- `fake_api`: a scripted HTTP server for the client's tests
- `attack_patches`: the hostile code of the attack tests
- `importer_repos`: small local git repositories and benchmark rows for the importers
- `go_mini`: a tiny Go module, its tasks and the Go attacks' code (the go runner's tests)

The fixtures are in the conftest files: tests/conftest.py (the options and what every tier
may use) and one in each tier's folder."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
