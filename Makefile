# The long runs, on demand. CI runs the CI-sized versions through `bash scripts/test.sh`.
PY := .venv/bin/python

.PHONY: stress fuzz load attacks test demo

stress: fuzz load attacks

fuzz:      ## schemathesis: about 14,000 generated requests over every operation, SQLite and PostgreSQL; figures in benchmarks/out/fuzz.json
	GRADER_FUZZ_EXAMPLES=600 $(PY) -m pytest -q tests/test_schema_fuzz.py -s

load:      ## 10,000 submissions through the whole service; figures in benchmarks/out/load.json
	$(PY) benchmarks/load.py --count 10000

attacks:   ## every hostile submission under runc and gVisor, then the fault tests
	$(PY) -m pytest -q tests/test_attacks.py tests/test_service_faults.py tests/test_service_e2e.py
	$(PY) -m pytest -q --disruptive tests/test_dockerd_restart.py

test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh
