# epochgate: `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install
install: $(STAMP) ## Create .venv and install epochgate with the dev extras

.PHONY: test
test: $(STAMP) ## Run the whole test suite
	$(BIN)/pytest -q

.PHONY: demo
demo: $(STAMP) ## Run the bank example end to end (late data included) and check it
	$(BIN)/epochgate demo

.PHONY: unit
unit: $(STAMP) ## Run only the fast, pure unit tests
	$(BIN)/pytest -q -m unit

.PHONY: lint
lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

.PHONY: format
format: $(STAMP) ## Apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

.PHONY: typecheck
typecheck: $(STAMP) ## mypy --strict on the packages
	$(BIN)/mypy

.PHONY: check
check: lint typecheck test ## Exactly what CI runs: lint, format check, types, tests

.PHONY: bench
bench: $(STAMP) ## Run the benchmarks (prints figures and ratios)
	$(BIN)/python bench/bench_tracker.py
	$(BIN)/python bench/bench_ledger.py
	$(BIN)/python bench/bench_connect.py

.PHONY: clean
clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis
