"""Exclusive domains on a cluster (issue 21), ``tierra scheduler`` as a real process
against the real API server: an exclusive gang takes the rack nobody uses; while it runs
another gang that would need that rack's idle room waits, saying why; once its pod is
gone the rack is free again."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import Fabric, placements, start_scheduler
from kube_helpers import kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import PODS, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import PodShape, pod_manifest

pytestmark = pytest.mark.kube


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes and Volcano's PodGroups are CRDs."""


async def group(
    kube: Kube, namespace: str, name: str, size: int, *, tier: str, scheduler: str, fabric: Fabric,
    notes: dict[str, str] | None = None,
) -> None:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if notes:
        meta["annotations"] = notes
    spec = {"minMember": size, "networkTopology": {"mode": "hard", "highestTierName": tier}}
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}
    await kube.request(
        "POST", VOLCANO_PODGROUPS.path(namespace), body={**body, "metadata": meta, "spec": spec}
    )
    for i in range(size):
        pod = pod_manifest(
            f"{name}-{i}",
            namespace,
            shape=PodShape(cpu="1", gpus=4),
            scheduler_name=scheduler,
            node_selector=fabric.label,
            annotations={"scheduling.k8s.io/group-name": name},
        )
        await kube.request("POST", PODS.path(namespace), body=pod)


def test_an_exclusive_gang_holds_its_rack_while_it_runs(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("excl", spines=1, racks=2, nodes=2)
    name = "tierra-e2e-excl"
    r1 = f"{fabric.name}-s0-r1"

    async def body(kube: Kube) -> None:
        await fabric.create(kube)
        web = pod_manifest("web", namespace, shape=PodShape(gpus=4), scheduler_name="other")
        web["spec"]["nodeName"] = fabric.node_names()[0]  # rack r0 runs another gang
        await kube.request("POST", PODS.path(namespace), body=web)
        notes = {"topology.tierra.dev/exclusive-tier": "rack"}
        await group(
            kube, namespace, "bench", 1, tier="rack", scheduler=name, fabric=fabric, notes=notes
        )
        await asyncio.sleep(1.1)  # whole-second creationTimestamp: sweep is the younger
        await group(kube, namespace, "sweep", 4, tier="spine", scheduler=name, fabric=fabric)
        scheduler, _ = start_scheduler(control_plane, tmp_path, name)
        try:
            deadline = time.time() + 60
            while not (await placements(kube, namespace)).get("bench-0"):
                assert time.time() < deadline, scheduler.log_tail(40)
                await asyncio.sleep(0.1)
            placed = await placements(kube, namespace)
            assert fabric.rack_of(placed["bench-0"]) == r1
            await asyncio.sleep(3)  # sessions every 0.5 s: sweep had its chances
            placed = await placements(kube, namespace)
            assert not any(placed[f"sweep-{i}"] for i in range(4)), placed
            sweep = await kube.get(VOLCANO_PODGROUPS.path(namespace, "sweep"))
            (cond,) = sweep["status"]["conditions"]
            assert "held by exclusive gangs" in cond["message"], cond
            # bench finishes (its pod goes): r1's room is everybody's again
            await kube.request("DELETE", PODS.path(namespace, "bench-0"))
            while True:
                placed = await placements(kube, namespace)
                if all(placed.get(f"sweep-{i}") for i in range(4)):
                    break
                assert time.time() < deadline + 30, scheduler.log_tail(40)
                await asyncio.sleep(0.1)
            placed = await placements(kube, namespace)
            racks = {fabric.rack_of(placed[f"sweep-{i}"]) for i in range(4)}
            assert r1 in racks  # the rack bench held
        finally:
            scheduler.stop()

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            await body(kube)

    asyncio.run(main())
