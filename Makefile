# Every target prepares its own interpreter first (make setup is idempotent).
PY      := .venv/bin/python
BACKEND ?= auto
REPORT  ?= reports/out
ARGS    ?=
# pytest-xdist workers for make test (2 cores on CI machines)
TEST_WORKERS ?= 2

.PHONY: setup verify test clean

setup:
	@scripts/setup_env.sh

## verify: every registered kernel of every op, per-case report in $(REPORT)/verify.json
verify: setup
	$(PY) -m harness verify --backend $(BACKEND) --report-dir $(REPORT) $(ARGS)

## test: the harness's own tests
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests

clean:
	rm -rf reports/out .hypothesis .pytest_cache
