# The long runs, on demand. CI runs the CI-sized versions through `bash scripts/test.sh`.
PY := .venv/bin/python

.PHONY: stress fuzz load attacks test unit service docker browser demo

stress: fuzz load attacks

fuzz:      ## schemathesis: about 14,000 generated requests over every operation, SQLite and PostgreSQL; figures in benchmarks/out/fuzz.json
	GRADER_FUZZ_EXAMPLES=600 $(PY) -m pytest -q tests/docker/test_schema_fuzz.py -s

load:      ## 10,000 submissions through the whole service; figures in benchmarks/out/load.json
	$(PY) benchmarks/load.py --count 10000

attacks:   ## every hostile submission under runc and gVisor, then the fault tests
	$(PY) -m pytest -q tests/docker/test_attacks.py tests/docker/test_service_faults.py tests/docker/test_service_e2e.py
	$(PY) -m pytest -q --disruptive tests/docker/test_dockerd_restart.py

test:      ## everything, as CI runs it: set-up, lint, types, then the tiers (tests/README.md)
	bash scripts/test.sh

# one tier alone, as scripts/test.sh runs it (its set-up, lint and image builds left out)
unit:      ## needs nothing; stops at the first failure
	$(PY) -m pytest -q -x tests/unit

service:   ## Redis, PostgreSQL, gunicorn; no Docker
	$(PY) -m pytest -q -n 2 --dist loadfile tests/service

docker:    ## the Docker engine, gVisor included (the disruptive dockerd restart left out)
	$(PY) -m pytest -q -n $${GRADER_TEST_DOCKER_WORKERS:-0} --dist loadfile tests/docker

browser:   ## headless Chromium against a live server
	$(PY) -m pytest -q tests/browser

demo:
	bash scripts/demo.sh
