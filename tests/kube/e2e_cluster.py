"""Building blocks of the end-to-end scheduler tests: a small fabric of KWOK-style nodes
with HyperNodes, gangs of both APIs, and ``tierra scheduler`` run as a real process.

Every test gets its own node label, scheduler name and namespace, so tests sharing the
session's API server never place pods on each other's nodes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tierra.kube.client import ApiError, Kube
from tierra.kube.resources import (
    PODS,
    TIERRA_HYPERNODES,
    VOLCANO_PODGROUPS,
    WORKLOAD_PODGROUPS,
)
from tierra.kube.testing import ADMIN, ControlPlane, ManagedProcess
from tierra.kube.testing.controlplane import free_ports
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

RACK_KEY = "topology.kubernetes.io/rack"
GPU = "nvidia.com/gpu"
TIERRA = [sys.executable, "-c", "from tierra.cli import main; main()"]


@dataclass(frozen=True)
class Fabric:
    """``spines`` x ``racks`` x ``nodes`` nodes of 8 GPUs, labelled and with HyperNodes."""

    name: str
    spines: int = 2
    racks: int = 2
    nodes: int = 4

    @property
    def label(self) -> dict[str, str]:
        return {"tierra.dev/e2e": self.name}

    def node_names(self) -> list[str]:
        return [
            f"{self.name}-s{s}-r{r}-{n}"
            for s in range(self.spines)
            for r in range(self.racks)
            for n in range(self.nodes)
        ]

    def rack_of(self, node: str) -> str:
        return node.rsplit("-", 1)[0]

    async def create(self, kube: Kube) -> None:
        shape = NodeShape(cpu="64", memory="512Gi", gpus=8)
        for name in self.node_names():
            labels = {**self.label, RACK_KEY: self.rack_of(name)}
            await kube.request(
                "POST", "/api/v1/nodes", body=node_manifest(name, shape=shape, labels=labels)
            )
        for s in range(self.spines):
            spine = f"{self.name}-s{s}"
            racks = [f"{spine}-r{r}" for r in range(self.racks)]
            for rack in racks:
                members = [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{rack}-"}}}]
                await kube.request(
                    "POST", TIERRA_HYPERNODES.path(), body=hypernode(rack, 1, "rack", members)
                )
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": r}}} for r in racks
            ]
            await kube.request(
                "POST", TIERRA_HYPERNODES.path(), body=hypernode(spine, 2, "spine", members)
            )


def hypernode(name: str, tier: int, tier_name: str, members: list[Any]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.tierra.dev/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "tierName": tier_name, "members": members},
    }


async def _gang(
    kube: Kube,
    namespace: str,
    name: str,
    size: int,
    group: tuple[Any, str, dict[str, Any]],
    *,
    scheduler: str,
    fabric: Fabric,
    gpus: int,
    labels_of: Any = None,
) -> list[str]:
    """A PodGroup (``group``: resource, apiVersion, spec) and ``size`` pods joining it:
    Volcano's by annotation, the Workload API's by ``spec.schedulingGroup``."""
    resource, api_version, spec = group
    metadata = {"name": name, "namespace": namespace}
    await kube.request(
        "POST",
        resource.path(namespace),
        body={"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec},
    )
    volcano = resource == VOLCANO_PODGROUPS
    names = [f"{name}-{i}" for i in range(size)]
    for i, pod in enumerate(names):
        body = pod_manifest(
            pod,
            namespace,
            shape=PodShape(cpu="1", gpus=gpus),
            scheduler_name=scheduler,
            node_selector=fabric.label,
            annotations={"scheduling.k8s.io/group-name": name} if volcano else None,
            labels=labels_of(i) if labels_of else None,
        )
        if not volcano:
            body["spec"]["schedulingGroup"] = {"podGroupName": name}
        await kube.request("POST", PODS.path(namespace), body=body)
    return names


async def volcano_gang(
    kube: Kube,
    namespace: str,
    name: str,
    size: int,
    *,
    scheduler: str,
    fabric: Fabric,
    gpus: int = 4,
    topology: Mapping[str, Any] | None = None,
    sub_groups: list[dict[str, Any]] | None = None,
    labels_of: Any = None,
) -> list[str]:
    spec: dict[str, Any] = {"minMember": size}
    if topology is not None:
        spec["networkTopology"] = dict(topology)
    if sub_groups:
        spec["subGroupPolicy"] = sub_groups
    group = (VOLCANO_PODGROUPS, "scheduling.volcano.sh/v1beta1", spec)
    return await _gang(
        kube,
        namespace,
        name,
        size,
        group,
        scheduler=scheduler,
        fabric=fabric,
        gpus=gpus,
        labels_of=labels_of,
    )


async def workload_gang(
    kube: Kube,
    namespace: str,
    name: str,
    size: int,
    *,
    scheduler: str,
    fabric: Fabric,
    gpus: int = 4,
    key: str | None = RACK_KEY,
) -> list[str]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": size}}}
    if key:
        spec["schedulingConstraints"] = {"topology": [{"key": key}]}
    group = (WORKLOAD_PODGROUPS, "scheduling.k8s.io/v1alpha2", spec)
    return await _gang(
        kube, namespace, name, size, group, scheduler=scheduler, fabric=fabric, gpus=gpus
    )


async def placements(kube: Kube, namespace: str) -> dict[str, str]:
    body = await kube.get(PODS.path(namespace))
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in body["items"]}


async def gpus_used(kube: Kube, nodes: list[str]) -> Counter[str]:
    """GPUs requested by pods bound to each of ``nodes``, over every namespace."""
    body = await kube.get(PODS.path())
    used: Counter[str] = Counter()
    wanted = set(nodes)
    for p in body["items"]:
        node = p["spec"].get("nodeName")
        if node in wanted:
            for c in p["spec"]["containers"]:
                used[node] += int(c.get("resources", {}).get("requests", {}).get(GPU, 0))
    return used


async def wait_bound(
    kube: Kube, namespace: str, count: int, timeout: float, process: ManagedProcess | None = None
) -> dict[str, str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        placed = await placements(kube, namespace)
        if sum(1 for n in placed.values() if n) >= count:
            return placed
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the scheduler exited:\n{process.log_tail(40)}")
        if loop.time() > deadline:
            bound = sum(1 for n in placed.values() if n)
            tail = process.log_tail(40) if process is not None else ""
            raise AssertionError(f"{bound} of {count} pods bound after {timeout} s\n{tail}")
        await asyncio.sleep(0.1)


def start_scheduler(
    plane: ControlPlane,
    workdir: Path,
    name: str,
    *extra: str,
    leader: bool = False,
    user: str = ADMIN,
) -> tuple[ManagedProcess, int]:
    """``tierra scheduler`` as a real process (as ``user``); returns it and its
    metrics/health port."""
    (port,) = free_ports(1)
    args = [
        *TIERRA,
        "scheduler",
        "--kubeconfig",
        str(plane.kubeconfig_for(user)),
        "--scheduler-name",
        name,
        "--metrics-port",
        str(port),
        "--health-port",
        str(port),
        "--bind-address",
        "127.0.0.1",
        "--period",
        "0.5",
    ]
    if not leader:
        args.append("--no-leader-elect")
    args.extend(extra)
    log = workdir / f"scheduler-{name}-{port}.log"
    return ManagedProcess(f"tierra scheduler {name}", args, log), port


def wait_ready(process: ManagedProcess, port: int, timeout: float = 120.0) -> None:
    """Until ``tierra scheduler`` answers /readyz (its informers synced): a test whose
    clock starts at an object's creation (a delay, a wait, a deadline) makes the objects
    after this, so a start-up slowed by a loaded machine does not eat into it."""
    deadline = time.monotonic() + timeout
    while scrape(port, "/readyz")[0] != 200:
        assert process.poll() is None, process.log_tail(40)
        assert time.monotonic() < deadline, f"not ready in {timeout:g} s\n{process.log_tail(40)}"
        time.sleep(0.2)


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample ``name`` in Prometheus text (0 if absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def tierra(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TIERRA, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


async def read(kube: Kube, path: str) -> dict[str, Any] | None:
    try:
        return dict(await kube.get(path))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def load_json(text: str) -> Any:
    return json.loads(text)


async def at_first_binding(
    kube: Kube, namespace: str, start: Callable[[], Awaitable[None]], then: Callable[[], None]
) -> None:
    """Watch ``namespace``; run ``start``; call ``then`` the moment a pod is seen bound.

    A watch reacts within milliseconds, where polling a list can miss a whole gang's
    bindings between two polls on a busy machine."""
    listing = await kube.get(PODS.path(namespace), query={"limit": 1})
    query = {"watch": True, "resourceVersion": listing["metadata"]["resourceVersion"]}
    async with kube.stream(PODS.path(namespace), query=query, read_timeout=120) as lines:
        await start()
        async for line in lines:
            event = json.loads(line)
            if event.get("type") == "MODIFIED" and event["object"]["spec"].get("nodeName"):
                then()
                return
    raise AssertionError("the watch ended before any pod was bound")
