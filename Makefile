# Two commands on a fresh machine:  make setup  &&  make test
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup test lint unit engine bench clean

setup:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --retries 10 --timeout 120 --upgrade pip
	# spotroute-checkpoint is on no index: the path satisfies spotroute's pin on it
	bash scripts/pip-install.sh $(BIN)/pip -e ./packages/spotroute-checkpoint -e '.[dev,checkpoint,parquet]'
	bash scripts/ensure-pulumi.sh
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-test-servers.sh

lint:
	$(BIN)/ruff check router components policies tests bench
	$(BIN)/mypy

unit:
	$(BIN)/pytest -q -n 2 -m "not engine"

engine:
	PATH="$$(bash scripts/ensure-pulumi.sh --print-dir):$$PATH" $(BIN)/pytest -q -m engine

test: lint
	PATH="$$(bash scripts/ensure-pulumi.sh --print-dir):$$(bash scripts/ensure-test-servers.sh --print-dir)/bin:$$PATH" $(BIN)/pytest -q -n 2

bench:
	$(BIN)/python bench/planner_bench.py
	$(BIN)/python bench/cli_start_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
