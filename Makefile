# decguard_pipeline: every target installs what it needs into .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: run test install install-test lint ui bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# DuckDB is pinned to the release its extension wheels are built for (the warehouse is a
# DuckLake: docs/adr/warehouse-format.md); the check loads them from the wheels, offline
$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m decguard_pipeline.warehouse.check_install >/dev/null
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[test]"
	$(BIN)/python -m decguard_pipeline.warehouse.check_install ducklake sqlite_scanner \
	    postgres_scanner httpfs >/dev/null
	touch $@ $(STAMP_RUN)

install: $(STAMP_RUN)
install-test: $(STAMP_TEST)

## run: evaluate every bundled example contract through Dagster (mock backends and the demo LLM server, local warehouse)
## (two at a time on Dagster's multiprocess executor, docs/deploy.md; RUN_WORKERS=1, or
## DECGUARD_WORKERS, for one, in-process)
RUN_WORKERS ?= $(or $(DECGUARD_WORKERS),2)
## (the package's bytecode compiled first, ~70 ms when up to date: with PYTHONDONTWRITEBYTECODE
## set, as on many CI images, every process would otherwise compile what it imports again)
run: install
	$(BIN)/python -m compileall -q decguard_pipeline
	$(BIN)/decguard-pipeline evaluate --workers $(RUN_WORKERS)

## test: lint, check the import layers, validate the Dagster definitions (dg check defs), run
## the whole suite in TEST_WORKERS processes (pytest-xdist; worksteal: a worker that runs out
## takes tests queued on the other, so the long ones do not finish on one worker at the end)
TEST_WORKERS ?= 2
test: install-test
	$(BIN)/ruff check decguard_pipeline decguard_pipeline_tests bench
	$(BIN)/lint-imports
	env -u DAGSTER_HOME VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/dg check defs
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

lint: install-test
	$(BIN)/ruff check decguard_pipeline decguard_pipeline_tests bench
	$(BIN)/lint-imports
	$(BIN)/ruff format --check decguard_pipeline decguard_pipeline_tests bench

## ui: open the Dagster UI (webserver + daemon) on workspace.yaml, instance in .dagster_home
ui: install
	$(BIN)/decguard-pipeline ui

## bench: side-by-side benchmarks against decguard==0.1.1
bench: install-test
	$(BIN)/python bench/golden_run.py

clean:
	rm -rf $(VENV) .dagster_home data/warehouse .pytest_cache
