# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The dashboard's tests and benchmark drive Debian's Chromium through Playwright (its own
# browser download needs a network this project does not have): installed when missing.
CHROMIUM ?= /usr/bin/chromium
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: chart image image-tools demo test check lint typecheck bench bench-topology bench-discovery bench-sim bench-queues bench-scheduler bench-podrules bench-cli bench-web screenshots clean bench-controller bench-million bench-million-live bench-dra

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
test: check controlplane-build $(CHROMIUM) image-tools
	$(BIN)/python -m pytest -q

# The image from deploy/Dockerfile, built with buildah (hack/image/build.sh): on the official
# python slim base where a registry answers, else on a base made from Debian's packages with
# mmdebstrap. Both tools are Debian packages, installed when missing. A second build with the
# same sources is skipped (the image carries their hash).
# The Helm chart's templates, regenerated from the kustomize manifests in deploy/ (the one
# source of truth; tests/kube/test_helm.py fails when they are stale).
chart: $(STAMP) controlplane-build
	$(BIN)/python hack/helm/generate.py

image: image-tools
	bash hack/image/build.sh

image-tools:
	command -v buildah >/dev/null && command -v mmdebstrap >/dev/null || { \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			buildah mmdebstrap; }

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		chromium fonts-dejavu-core

# Retake the dashboard screenshots under docs/ (the README shows them) from the browser test.
screenshots: $(STAMP) $(CHROMIUM)
	TIERRA_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/web/test_web_browser.py -k screenshots

bench: bench-topology bench-discovery bench-sim bench-queues bench-kube-scheduler bench-kube-compare bench-scheduler bench-cli bench-web bench-controller bench-million bench-million-live

bench-topology: $(STAMP)
	$(BIN)/python bench/topology_index.py

bench-discovery: $(STAMP)
	$(BIN)/python bench/discovery_labels.py
	$(BIN)/python bench/discovery_fabric.py

bench-scheduler: $(STAMP)
	$(BIN)/python bench/scheduler_scale.py

bench-million: $(STAMP)
	$(BIN)/python bench/million_pods.py

# The live scheduler starting on a million pods: the stand-in API server by default (the
# test API server needs ~22 GiB for them); --source apiserver for the real one, smaller.
bench-million-live: $(STAMP) controlplane-build
	$(BIN)/python bench/million_live.py

bench-podrules: $(STAMP)
	$(BIN)/python bench/podrules_scale.py

bench-cli: $(STAMP)
	$(BIN)/python bench/cli_startup.py

bench-web: $(STAMP) $(CHROMIUM)
	$(BIN)/python bench/web_dashboard.py

bench-controller: $(STAMP) controlplane-build
	$(BIN)/python bench/controller_scale.py

bench-sim: $(STAMP)
	$(BIN)/python bench/sim_scale.py
	$(BIN)/python bench/quality.py

bench-queues: $(STAMP)
	$(BIN)/python bench/queues_share.py

# DRA beside kube-scheduler on one API server (issue 20): 1,000 nodes x (8 GPUs + 8 NICs),
# 4,000 pods with claims. Long (tens of minutes on 2 cores); not part of `make bench`.
bench-dra: $(STAMP) controlplane-build
	$(BIN)/python bench/dra_compare.py --nodes 1000 --pods 4000

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache

include hack/controlplane/controlplane.mk
