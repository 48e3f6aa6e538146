# Every target prepares its own interpreter first (make setup is idempotent).
PY      := .venv/bin/python
BACKEND ?= auto
REPORT  ?= reports/out
ARGS    ?=
# extra arguments of the mutation gate (make mutants, make verify), e.g. MUTATE_ARGS="--min-score 0.95"
MUTATE_ARGS ?=
# FULL=1: a whole run, reusing no saved verdict or mutant outcome ($(REPORT)/incremental)
FULL    ?=
NO_CACHE := $(if $(filter 1,$(FULL)),--no-cache,)
# mutation workers: auto = as many as the machine sustains (on CUDA half the cores: each worker
# spends most of its time compiling on the CPU); mutate's own default is one per GPU
MUTATE_JOBS ?= auto
# pytest-xdist workers for make test (2 cores on CI machines)
TEST_WORKERS ?= 2

.PHONY: setup verify test clean sanitize report browser mutants screenshot

setup:
	@scripts/setup_env.sh

## verify: the gate, in one process (python -m harness gate): verify (every kernel of every op),
## train-check, the mutation campaign, then the rendered reports; every step runs even after a
## failure, and the exit status is the last failure's
verify: setup
	@export HARNESS_RUN_GROUP="make-verify-$$(date -u +%Y%m%dT%H%M%S)-$$$$"; \
	$(PY) -m harness gate --backend $(BACKEND) --report-dir $(REPORT) --jobs $(MUTATE_JOBS) $(NO_CACHE) \
	  $(if $(BASELINE),--baseline $(BASELINE)) --verify-args="$(ARGS)" --mutate-args="$(MUTATE_ARGS)"; rc=$$?; \
	if [ $$rc -ne 0 ]; then echo "make verify: FAILED (exit $$rc); see $(REPORT)/index.html"; fi; \
	exit $$rc

## mutants: the mutation gate (catalog, generated and plugin mutants), $(REPORT)/mutation.json
mutants: setup
	$(PY) -m harness mutate --backend $(BACKEND) --report-dir $(REPORT) --jobs $(MUTATE_JOBS) $(MUTATE_ARGS)

## report: index.html, junit.xml, summary.md from the JSON reports in $(REPORT) (CI runs it even after a failure)
report: setup
	$(PY) -m harness report --report-dir $(REPORT)

## browser: Debian's chromium for the HTML report test; where apt cannot install it, that test is skipped
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "browser: $$(command -v chromium)"; \
	else sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
	  if ($$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium) >/dev/null 2>&1; \
	  then echo "browser: installed $$(command -v chromium)"; \
	  else echo "browser: apt-get could not install chromium; the HTML report's browser test will be skipped"; fi; fi

## screenshot: the README's picture of the report, from a real run of the five-minute example
## (scripts/screenshot.sh; chromium from make browser)
screenshot: setup
	@scripts/screenshot.sh

## test: the harness's own tests
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests

## sanitize: project kernels under compute-sanitizer (memcheck, racecheck); needs a GPU
sanitize: setup
	$(PY) -m harness sanitize --report-dir $(REPORT)

## clean: remove generated output only: the files the harness wrote into $(REPORT) and the directories
## below it (listed in their .harness-manifest.json; a user's own files stay), caches; DRY_RUN=1 lists and removes nothing
GENERATED = .hypothesis .pytest_cache build
CLEAN_PY := $(if $(wildcard $(PY)),$(PY),python3)
clean:
	@$(CLEAN_PY) -m reports.clean $(REPORT) $(if $(filter 1,$(DRY_RUN)),--dry-run,)
	@paths="$$(for p in $(GENERATED) *.egg-info; do [ -e "$$p" ] && echo "$$p"; done; \
	  find . \( -path ./.venv -o -path ./.git -o -path ./shared \) -prune -o -type d -name __pycache__ -print)"; \
	if [ -z "$$paths" ]; then echo "clean: nothing to remove"; \
	elif [ "$(DRY_RUN)" = "1" ]; then echo "clean: DRY_RUN=1, would remove:"; printf '  %s\n' $$paths; \
	else echo "clean: removing:"; printf '  %s\n' $$paths; rm -rf $$paths; fi
