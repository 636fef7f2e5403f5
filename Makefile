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

.PHONY: help setup binaries demo-setup demo-binaries prometheus sim-up sim-down demo test test-external unit lint bench clean

help:
	@echo "make demo      set up (all but Kueue), start the embedded cluster, show its baseline, enable time-slicing on gpu-node, print the result"
	@echo "make test      set up and run every test (unit, integration, Gherkin features, lint, the external target)"
	@echo "make lint      yamllint, ruff, ansible-lint and ansible-test sanity on the collection"
	@echo "make test-external   the acceptance features against a separately started cluster (part of make test)"
	@echo "make bench     measure the figures in BENCHMARKS.md"
	@echo "make sim-up / sim-down   start / stop the embedded cluster"

$(STAMP): requirements-dev.txt pyproject.toml testbed/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	@# The runbooks' package and the test bed (testbed/pyproject.toml: `gpushare sim`), both editable.
	$(BIN)/pip install --quiet --no-deps -e . -e testbed
	$(BIN)/python scripts/check-collections.py requirements.yml
	@# The checkout is also the collection gpushare.gpu_sharing: linked into the venv's site-packages,
	@# which ansible-core scans for ansible_collections/, as `pip install -e .` does for the package.
	@# The venv's ansible-playbook, ansible-doc, ansible-lint and ansible-runner then find it from any
	@# directory, with no ansible.cfg, and the full names in the playbooks resolve to this checkout.
	site=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  mkdir -p $$site/ansible_collections/gpushare && ln -sfn $(CURDIR) $$site/ansible_collections/gpushare/gpu_sharing
	touch $@

# The venv, the Go builds and Prometheus at once: pip and apt wait mostly on their registries while
# the compiler has the CPUs. Then byte-compile the project's own modules: every runbook run imports
# them in fresh processes, and with PYTHONDONTWRITEBYTECODE set (as on CI machines) nothing would
# ever cache them.
setup:
	@$(MAKE) --no-print-directory -j3 $(STAMP) binaries prometheus
	@$(BIN)/python -m compileall -q src plugins roles tests scripts >/dev/null

binaries:
	@scripts/build-binaries.sh >/dev/null

# The demo's set-up: all but Kueue, which only queue backfill needs (a cold Kueue build is about 3 min).
demo-setup:
	@$(MAKE) --no-print-directory -j3 $(STAMP) demo-binaries prometheus
	@$(BIN)/python -m compileall -q src plugins roles tests scripts >/dev/null

demo-binaries:
	@scripts/build-binaries.sh --without kueue >/dev/null

prometheus:
	@bash scripts/install-prometheus.sh

sim-up: setup
	gpushare sim up

sim-down:
	@if [ -x $(BIN)/gpushare ]; then gpushare sim down; fi

# A cluster already running (with Kueue or without) is used as it is.
demo: demo-setup
	gpushare sim status >/dev/null 2>&1 || gpushare sim up --without kueue
	gpushare sim prometheus
	@echo "== the baseline before sharing: a week of DCGM data per GPU"
	ansible-playbook playbooks/baseline.yml
	@echo "== preview: what enabling time-slicing on gpu-node would change (writes nothing)"
	ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node --check --diff
	@echo "== the change"
	ansible-playbook playbooks/enable-timeslicing.yml -l gpu-node
	gpushare sim status
	@echo
	@echo "Next, in this shell (README.md, Run the runbooks by hand):"
	@echo '  source .venv/bin/activate                      # puts ansible-playbook and gpushare on the PATH'
	@echo '  export KUBECONFIG=$$(gpushare sim kubeconfig)   # for kubectl'
	@echo "  ansible-playbook playbooks/verify-sharing.yml -l gpu-node"
	@echo "  ansible-playbook playbooks/rollback-timeslicing.yml -l gpu-node --check --diff"
	@echo "  ansible-playbook playbooks/rollback-timeslicing.yml -l gpu-node"
	@gpushare sim status 2>/dev/null | grep -q '^kueue  *running' || echo "Queue backfill (playbooks/queue-backfill.yml) needs Kueue, which the demo leaves out to start sooner: \
	make sim-down sim-up builds it (minutes, once) and starts the cluster with it."

unit: $(STAMP)
	pytest tests/unit -q

# ansible-lint's syntax check reads the inventory; the embedded one needs a running cluster.
# scripts/sanity.sh: ansible-test sanity on the collection as it ships. One command, not a sub-make,
# where `test` runs it: make runs a recipe line that names $(MAKE) even under `make -n`.
LINT := yamllint -s . && ruff check . && ANSIBLE_INVENTORY=$(CURDIR)/inventories/example-staging ansible-lint && scripts/sanity.sh
lint: $(STAMP)
	$(LINT)

# Side by side: TEST_WORKERS workers, each with its own embedded cluster (.gpushare-test-gw<N>), a
# feature file at a time, and beside them the external target on EXTERNAL_SHARDS more clusters (its
# run also writes the cucumber JSON, which pytest-bdd cannot write under xdist). Together they keep
# this machine's 2 CPUs busy: more workers or shards only slow every test down (measured: 4 workers
# and 2 shards, 1733 s against 1526 s for 2 and 1). Each test runs once: the acceptance features and
# attacks on the external target, the rest (and the scenarios tagged @embedded, which only the
# embedded cluster can run) in the main suite. The lint runs beside them too: its tools use one CPU
# at a time, and the clusters starting take the other. Files are dealt out in collection order (features,
# integration, unit last), not xdist's default of most tests first, which left the one-scenario feature
# files (20-40 s each) for the end, where one worker ran them alone.
TEST_WORKERS ?= 2
EXTERNAL_SHARDS ?= 1
test: setup
	mkdir -p reports
	began=$$(date +%s); \
	( $(LINT) ) > reports/lint.log 2>&1 & lint=$$!; \
	( $(BIN)/python scripts/external_cluster.py --shards $(EXTERNAL_SHARDS) run -- -q > reports/external.log 2>&1; rc=$$?; date +%s > reports/external.ended; exit $$rc ) & external=$$!; \
	pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --beside-external-target --durations=25 --junitxml=reports/junit.xml; main=$$?; main_ended=$$(date +%s); \
	wait $$external; ext=$$?; wait $$lint; lint=$$?; \
	printf '{"began": %s, "main_s": %s, "external_s": %s, "passed": %s}\n' $$began $$((main_ended - began)) \
	  $$(( $$(cat reports/external.ended) - began )) $$(( !(main || ext || lint) )) > reports/make-test.json; \
	echo "== the external target (reports/external.log):"; grep -E '^(== external target|[0-9]+ (passed|failed)|FAILED|ERROR)' reports/external.log; \
	if [ $$lint -ne 0 ]; then echo "== make lint failed (reports/lint.log):"; tail -40 reports/lint.log; fi; \
	exit $$(( main || ext || lint ))

# The same features against clusters reached only through --kubeconfig/--inventory/--operator-namespace;
# alone on the machine, two such clusters side by side take 509 s where one takes 1344 s.
test-external: setup
	$(BIN)/python scripts/external_cluster.py --shards 2 run -- -q

bench: setup
	$(BIN)/python scripts/bench.py --output BENCHMARKS.md

clean: sim-down
	rm -rf $(VENV) .gpushare-test .gpushare-test-gw* .gpushare-external*
