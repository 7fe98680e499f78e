"""Kueue's TAS e2e cluster on a test control plane, for the tests that follow Kueue's
``test/e2e/tas/`` (v0.19.2) with ``tierra scheduler`` in Kueue's place.

Kueue runs those tests on ``hack/testing/kind-cluster-tas.yaml``: eight workers,
``kind-worker`` .. ``kind-worker8``, labelled ``cloud.provider.com/topology-block`` b1/b2
and ``cloud.provider.com/topology-rack`` r1/r2 (two racks of two per block), each given
one ``example.com/gpu`` (``suite_test.go``); its Topology ``datacenter`` has the levels
block, rack and hostname. Here the same eight nodes (KWOK-style: no kubelet, pods stay
Pending once bound), with the HyperNodes ``tierra discover labels`` makes from those
labels (as the controller's labels source would), kube-controller-manager's job,
statefulset, garbage-collector and taint-eviction controllers, and one ``tierra
scheduler`` process. Tests run one after another on it and leave their namespace empty.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_cluster import TIERRA, start_scheduler
from kube_helpers import kube_for

from tierra.kube.client import ApiError, Kube
from tierra.kube.manifests import crd_folder
from tierra.kube.resources import NODES, PODS
from tierra.kube.testing import (
    Binaries,
    ControllerManager,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.fake import node_manifest

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
EXTRA = "example.com/gpu"  # Kueue's extraResource
WORKERS = ["kind-worker", *(f"kind-worker{i}" for i in range(2, 9))]
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
CONTROLLERS = (
    "job-controller",
    "statefulset-controller",
    "garbage-collector-controller",
    "taint-eviction-controller",
    # it adds the pods' spec.nodeName index the taint-eviction controller looks pods up
    # by (only it and the node lifecycle controller add it; the latter would mark these
    # kubelet-less nodes unreachable); no DaemonSet is made here
    "daemonset-controller",
)
SCHEDULER = "tierra-kueue-kind"


def worker_node(i: int) -> dict[str, Any]:
    name = WORKERS[i]
    labels = {
        "cloud.provider.com/node-group": "tas-group",
        BLOCK: f"b{i // 4 + 1}",
        RACK: f"r{i // 2 % 2 + 1}",
        HOST: name,
    }
    body = node_manifest(name, labels=labels)
    for part in ("capacity", "allocatable"):
        body["status"][part] = {"cpu": "8", "memory": "32Gi", "pods": "110", EXTRA: "1"}
    return body


@dataclass
class Kind:
    """The cluster: its control plane, the scheduler's process and name."""

    plane: ControlPlane
    scheduler: ManagedProcess
    name: str = SCHEDULER

    def namespace(self, name: str) -> str:
        self.plane.kubectl("create", "namespace", name)
        return name

    def apply(self, *objects: Mapping[str, Any]) -> None:
        listing = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(listing))

    def run(self, body: Any) -> Any:
        """``await body(kube)`` in a fresh event loop."""

        async def main() -> Any:
            async with kube_for(self.plane) as kube:
                return await body(kube)

        return asyncio.run(main())

    def clean(self, namespace: str) -> None:
        """Delete the namespace's workloads and pods and wait until no pod is left (the
        next test needs all eight GPUs)."""
        for kind in ("jobs.batch", "statefulsets.apps"):
            self.plane.kubectl("-n", namespace, "delete", kind, "--all", "--wait=false")
        deadline = time.monotonic() + 60
        while True:
            self.plane.kubectl("-n", namespace, "delete", "pods", "--all", "--grace-period=0",
                               "--force", "--wait=false", check=False)  # fmt: skip
            left = self.plane.kubectl("-n", namespace, "get", "pods", "-o", "name").stdout
            if not left.strip():
                return
            assert time.monotonic() < deadline, f"pods left in {namespace}: {left}"
            time.sleep(0.5)


def hypernodes(workdir: Path) -> list[dict[str, Any]]:
    """What ``tierra discover labels`` makes of the workers' block and rack labels."""
    nodes = workdir / "kind-nodes.yaml"
    nodes.write_text(yaml.safe_dump_all([worker_node(i) for i in range(8)]))
    out = subprocess.run(
        [*TIERRA, "discover", "labels", "--levels", f"{BLOCK},{RACK}", "--name", "datacenter",
         str(nodes)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(out) if d]
    for d in docs:
        d.pop("status", None)
    return docs


@pytest.fixture(scope="module")
def kind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kind]:
    try:
        binaries = Binaries.find()
        find_binary("kube-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    workdir = tmp_path_factory.mktemp("kind")
    with ControlPlane(binaries) as plane, ControllerManager(plane, controllers=CONTROLLERS):
        plane.kubectl("apply", "-f", str(crd_folder() / "topology.tierra.dev_hypernodes.yaml"))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                      "crd/hypernodes.topology.tierra.dev")  # fmt: skip

        asyncio.run(_create_nodes(plane))
        listing = {"apiVersion": "v1", "kind": "List", "items": hypernodes(workdir)}
        plane.kubectl("apply", "-f", "-", input=json.dumps(listing))
        scheduler, _ = start_scheduler(plane, workdir, SCHEDULER)
        try:
            yield Kind(plane, scheduler)
        finally:
            scheduler.stop()


async def _create_nodes(plane: ControlPlane) -> None:
    """The eight workers (KWOK-style: status in the create body, which the API keeps)."""
    async with kube_for(plane) as kube:
        for i in range(8):
            await kube.request("POST", NODES.path(), body=worker_node(i))


def container(gpus: int = 1, cpu: str = "200m") -> dict[str, Any]:
    res = {"cpu": cpu, **({EXTRA: str(gpus)} if gpus else {})}
    return {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": res, "limits": res},
    }


def job(
    name: str,
    namespace: str,
    *,
    parallelism: int,
    completions: int | None = None,
    indexed: bool = False,
    annotations: Mapping[str, str] | None = None,
    pod_spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Kueue's ``testingjob.MakeJob``: its pods one Kueue pod group (the template's
    ``pod-group-name`` and ``pod-group-total-count``: tierra reads no Job object)."""
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completions": completions if completions is not None else parallelism,
        "backoffLimit": 3,
        "template": {
            "metadata": {
                "labels": {GROUP: name, "job-name": name},
                "annotations": {TOTAL: str(parallelism), **(annotations or {})},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "containers": [container()],
                **(pod_spec or {}),
            },
        },
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


async def pods(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    body = await kube.get(PODS.path(namespace))
    return list(body["items"])


async def wait_pods(
    kube: Kube, namespace: str, count: int, *, bound: bool = True, timeout: float = 60,
    process: ManagedProcess | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The namespace's pods once ``count`` of them exist (and are bound, unless not
    ``bound``); fails naming how many there were."""
    deadline = time.monotonic() + timeout
    while True:
        got = [p for p in await pods(kube, namespace) if "deletionTimestamp" not in p["metadata"]]
        ready = [p for p in got if p["spec"].get("nodeName")] if bound else got
        if len(ready) >= count:
            return got
        if time.monotonic() > deadline:
            tail = process.log_tail(30) if process is not None else ""
            raise AssertionError(f"{len(ready)} of {count} pods after {timeout} s\n{tail}")
        await asyncio.sleep(0.2)


def by_label(items: list[dict[str, Any]], *keys: str) -> dict[str, str]:
    """Each pod's node, keyed by its label values joined with '/' (Kueue's tests' keys)."""
    out = {}
    for p in items:
        labels = p["metadata"].get("labels", {})
        out["/".join(labels.get(k, "?") for k in keys)] = p["spec"].get("nodeName", "")
    return out


async def condition(kube: Kube, namespace: str, pod: str) -> dict[str, Any] | None:
    """The pod's ``PodScheduled`` condition, if written."""
    try:
        body = await kube.get(PODS.path(namespace, pod))
    except ApiError:
        return None
    for c in body.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled":
            return dict(c)
    return None
