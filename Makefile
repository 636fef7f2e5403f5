# gpushare — one-command setup, demo and tests. Everything installs from this repository's files.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Keep the embedded cluster of `make demo` apart from the one the tests start.
export GPUSHARE_STATE_DIR ?= $(CURDIR)/.gpushare

.PHONY: help setup binaries sim-up sim-down demo test unit lint bench clean

help:
	@echo "make demo      set up, start the embedded cluster, show its baseline, enable time-slicing on gpu-node, print the result"
	@echo "make test      set up and run every test (unit, integration, Gherkin features, lint)"
	@echo "make bench     measure the figures in BENCHMARKS.md"
	@echo "make sim-up / sim-down   start / stop the embedded cluster"

$(STAMP): requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	$(BIN)/python scripts/check-collections.py requirements.yml
	touch $@

setup: $(STAMP) binaries
	@bash scripts/install-prometheus.sh

binaries:
	@scripts/build-binaries.sh >/dev/null

sim-up: setup
	gpushare sim up

sim-down:
	@if [ -x $(BIN)/gpushare ]; then gpushare sim down; fi

demo: sim-up
	gpushare sim prometheus
	ansible-playbook playbooks/baseline.yml
	ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node
	gpushare sim status

unit: $(STAMP)
	pytest tests/unit -q

lint: $(STAMP)
	yamllint -s .
	ansible-lint

test: setup lint
	pytest -q

bench: setup
	$(BIN)/python scripts/bench.py --output BENCHMARKS.md

clean: sim-down
	rm -rf $(VENV) .gpushare-test
