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

# The venv's packages are installed by uv (the same versions pip resolves, in about half the
# time of a fresh install); pip installs them where uv cannot run. A wheel built from a source
# archive (PySpark's) is stored, not deflated: .ci/wheel-build.cfg. An index that sends no
# caching headers for an archive makes every install download and build it again, and uv keeps
# each build (about 1 GB for PySpark's): the install prunes what no install can use again.
$(BIN)/python:
	.ci/system-packages venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.9,<1' || true

$(STAMP): pyproject.toml | $(BIN)/python
	export DIST_EXTRA_CONFIG=$(abspath .ci/wheel-build.cfg) \
		&& $(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[dev]' \
		|| $(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/uv cache prune --quiet 2>/dev/null || true
	touch $@

.PHONY: install
install: $(STAMP) ## Create .venv and install epochgate with the dev extras

.PHONY: system
system: ## Install the system packages the suite needs (Java, ps, Chromium) when missing
	.ci/system-packages

.PHONY: test
# Three test processes (each with its own Spark session), a whole test file to each at a time:
# the suite's Spark jobs, child processes and waits overlap on the two cores (with two, the
# cores were idle 12% of the time; with three, 4%). The files are taken in the suite's
# order (the slow ones first, longest first: tests/conftest.py), not by test count.
TEST_WORKERS ?= 3

# The suite starts hundreds of Python processes: they keep the project's compiled modules
# (PYTHONDONTWRITEBYTECODE empty) rather than compile them again, each.
# The suite sees no make variables: a `make` a test runs (`make ui`) is not a child of this one
# (under `make check` it would find this make's job server and warn that it cannot use it).
test: $(STAMP) system ## Run the whole test suite (installs what it needs first; TEST_WORKERS=3)
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PYTHONDONTWRITEBYTECODE= \
		$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The demo's Dagster instance (DAGSTER_HOME) and its ledger and data, under the state directory.
EPOCHGATE_HOME ?= .epochgate
UI_PORT ?= 3000
DAGSTER_DIR = $(abspath $(EPOCHGATE_HOME)/dagster)
DEMO_DIR = $(abspath $(EPOCHGATE_HOME)/demo)

.PHONY: demo
demo: $(STAMP) ## Run the bank example through Dagster (late data included) and check it
	.ci/system-packages java ps
	$(BIN)/python -m dagster_project.dev.demo

.PHONY: ui
ui: $(STAMP) ## Dagster UI and daemon on the demo's instance (UI_PORT=3000)
	@echo "Dagster UI: http://127.0.0.1:$(UI_PORT)  (instance $(DAGSTER_DIR); Ctrl-C stops it)"
	@test -f $(DEMO_DIR)/ledger.duckdb || echo "no demo ledger in $(DEMO_DIR) yet: run make demo"
	@mkdir -p $(DAGSTER_DIR)
	@test -f $(DAGSTER_DIR)/dagster.yaml || cp dagster_project/dagster.yaml $(DAGSTER_DIR)/
	DAGSTER_HOME=$(DAGSTER_DIR) EPOCHGATE_LEDGER=$(DEMO_DIR)/ledger.duckdb \
		EPOCHGATE_DATA=$(DEMO_DIR)/data \
		$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(UI_PORT)

.PHONY: jar
# epochgate's Hadoop classes (pipelines/spark/java, see pipelines/spark/local_fs.py), compiled for
# Java 17 and later against the installed PySpark's jars. JAR=PATH writes them elsewhere: the
# suite compares such a build with the jar the package carries.
JAR ?= pipelines/spark/jars/epochgate-spark.jar
jar: $(STAMP) ## Rebuild pipelines/spark/jars/epochgate-spark.jar from pipelines/spark/java (a JDK)
	.ci/system-packages javac
	classes=$$(mktemp -d) && trap 'rm -rf "$$classes"' EXIT \
		&& jars=$$($(BIN)/python -c 'from pipelines.spark._internals import pyspark_home; print(pyspark_home() / "jars")') \
		&& javac --release 17 -nowarn -cp "$$jars/*" -d "$$classes" $$(find pipelines/spark/java -name '*.java' | sort) \
		&& jar --create --no-manifest --date 2026-01-01T00:00:00Z --file $(JAR) -C "$$classes" .

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

.PHONY: docs
# The site's generated pages import epochgate (the CLI reference from its parser), so the docs
# build where the package is installed. build/ is ignored by git.
docs: $(STAMP) ## Build the docs site with mkdocs --strict into build/docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

.PHONY: docs-images
docs-images: $(STAMP) system ## Retake the docs' screenshots of the Dagster UI (the UI test takes them)
	EPOCHGATE_DOCS_IMAGES=1 $(BIN)/pytest -q -p no:randomly tests/dagster_project/test_ui.py

.PHONY: check
# The static checks (about half a minute on one core) run beside the test suite, not before it;
# make still fails when any of them fails, once all have ended.
check: $(STAMP) ## Exactly what CI runs: lint, format check, types, docs, tests
	$(MAKE) --no-print-directory -j4 lint typecheck docs test

.PHONY: bench
bench: $(STAMP) ## Run every bench script, writing bench/RESULTS.md and bench/plots (BENCH_SIZE=full: full sizes)
	.ci/system-packages java ps
	$(BIN)/python bench/bench_tracker.py
	$(BIN)/python bench/bench_ledger.py
	$(BIN)/python bench/bench_connect.py
	$(BIN)/python bench/bench_dagster.py
	$(BIN)/python bench/bench_overhead.py --profile
	$(BIN)/python bench/bench_partial.py
	$(BIN)/python bench/bench_capture.py
	$(BIN)/python bench/bench_sinks.py
	$(BIN)/python bench/bench_peers.py
	$(BIN)/python bench/bench_incremental.py
	$(BIN)/python bench/bench_scaling.py

.PHONY: faults
faults: $(STAMP) system ## Kill bank at every fault point and at random (FAULTS=full), check, write bench/RESULTS.md
	FAULTS=full FAULTS_RESULTS=bench/RESULTS.md $(BIN)/pytest -q -m faults tests/faults tests/progress/test_faults.py \
		tests/progress/ledger/test_ledger_processes.py

.PHONY: clean
clean: ## Remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis
