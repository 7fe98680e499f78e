# Targets for the real Kubernetes control plane (included from the top-level Makefile).
#
#   make controlplane-build    build etcd, kube-apiserver, kube-scheduler, kubectl,
#                              kube-controller-manager and helm from the Go module proxy
#                              into the cache folder (skipped when it is current)
#   make controlplane-up       run etcd + kube-apiserver in the foreground; prints the
#                              kubeconfig path; Ctrl-C stops it and removes its folder.
#                              WORKLOAD_API=1 also serves the upstream Workload API
#                              (scheduling.k8s.io/v1alpha2, its feature gates on);
#                              DRA_WORKLOAD_CLAIMS=1 that and DRAWorkloadResourceClaims
#                              (claims a PodGroup shares, spec.resourceClaims)
#   make bench-kube-scheduler  kube-scheduler binding 10,000 pods on 5,000 fake nodes
#   make bench-kube-compare    tierra scheduler beside kube-scheduler: plain pods, gangs, memory
#
# KUBEBUILDER_ASSETS, if set, names a folder with existing binaries: nothing is built then.

CONTROLPLANE_HACK := hack/controlplane
CONTROLPLANE_PY   ?= $(if $(BIN),$(BIN)/python,python3)

.PHONY: controlplane-build controlplane-up bench-kube-scheduler bench-kube-compare

controlplane-build:
	bash $(CONTROLPLANE_HACK)/build.sh

CONTROLPLANE_UP_FLAGS ?= $(if $(WORKLOAD_API),--workload-api,) \
	$(if $(DRA_WORKLOAD_CLAIMS),--dra-workload-claims,)

controlplane-up: $(STAMP) controlplane-build
	$(CONTROLPLANE_PY) -m tierra.kube.testing up $(CONTROLPLANE_UP_FLAGS)

bench-kube-scheduler: $(STAMP) controlplane-build
	$(CONTROLPLANE_PY) bench/kube_scheduler_bind.py

bench-kube-compare: $(STAMP) controlplane-build
	$(CONTROLPLANE_PY) bench/kube_scheduler_compare.py
