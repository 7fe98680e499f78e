# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test check lint typecheck bench bench-topology bench-discovery bench-sim bench-scheduler bench-controller clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tierra simulate

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy --strict src
	$(BIN)/lint-imports

check: lint typecheck

# The Kubernetes tests run against a real etcd and kube-apiserver built from the Go
# module proxy (hack/controlplane); the build is skipped when its cache is current.
test: check controlplane-build
	$(BIN)/python -m pytest -q

bench: bench-topology bench-discovery bench-sim bench-kube-scheduler bench-scheduler bench-controller

bench-topology: $(STAMP)
	$(BIN)/python bench/topology_index.py

bench-discovery: $(STAMP)
	$(BIN)/python bench/discovery_labels.py
	$(BIN)/python bench/discovery_fabric.py

bench-scheduler: $(STAMP)
	$(BIN)/python bench/scheduler_scale.py

bench-controller: $(STAMP) controlplane-build
	$(BIN)/python bench/controller_scale.py

bench-sim: $(STAMP)
	$(BIN)/python bench/sim_scale.py
	$(BIN)/python bench/quality.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

include hack/controlplane/controlplane.mk
