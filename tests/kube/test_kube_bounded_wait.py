"""Bounded wait on a cluster (issue 21), ``tierra scheduler`` as a real process against
the real API server: the PodGroup's annotations survive Volcano's PodGroup CRD, the gang
waits for a rack as long as they say, then binds in the spine, and its PodGroup status
says which happened."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import Fabric, placements, start_scheduler, wait_ready
from kube_helpers import kube_for

from tierra.api.meta import parse_time
from tierra.kube.client import Kube
from tierra.kube.resources import PODS, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import PodShape, pod_manifest

pytestmark = pytest.mark.kube
WAIT = 8.0


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes and Volcano's PodGroups are CRDs."""


async def condition(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    group = await kube.get(VOLCANO_PODGROUPS.path(namespace, name))
    conditions = group.get("status", {}).get("conditions", [])
    return conditions[0] if conditions else {}


def test_a_gang_waits_for_a_rack_then_takes_the_spine(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("bwait", spines=1, racks=2, nodes=2)
    name = "tierra-e2e-bwait"

    async def setup(kube: Kube) -> float:
        await fabric.create(kube)
        for node in fabric.node_names()[1::2]:  # half of each rack busy: no rack holds it
            body = pod_manifest(
                f"busy-{node}", namespace, shape=PodShape(gpus=4), scheduler_name="someone-else"
            )
            body["spec"]["nodeName"] = node
            await kube.request("POST", PODS.path(namespace), body=body)
        notes = {
            "topology.tierra.dev/wait-for-tier": "rack",
            "topology.tierra.dev/wait-for": f"{WAIT:g}s",
        }
        await kube.request(
            "POST",
            VOLCANO_PODGROUPS.path(namespace),
            body={
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "train", "namespace": namespace, "annotations": notes},
                "spec": {
                    "minMember": 2,
                    "networkTopology": {"mode": "hard", "highestTierName": "spine"},
                },
            },
        )
        for i in range(2):
            body = pod_manifest(
                f"train-{i}",
                namespace,
                shape=PodShape(cpu="1", gpus=8),
                scheduler_name=name,
                node_selector=fabric.label,
                annotations={"scheduling.k8s.io/group-name": "train"},
            )
            await kube.request("POST", PODS.path(namespace), body=body)
        stored = await kube.get(VOLCANO_PODGROUPS.path(namespace, "train"))
        assert stored["metadata"]["annotations"] == notes  # the CRD kept them
        pod = await kube.get(PODS.path(namespace, "train-0"))
        created = parse_time(pod["metadata"]["creationTimestamp"])
        assert created is not None
        return created

    async def body(kube: Kube) -> None:
        # Ready before the gang exists: the wait counts from the pods' creation, and a
        # start-up slower than WAIT (a loaded machine) would skip the waiting we look for.
        scheduler, port = start_scheduler(control_plane, tmp_path, name)
        try:
            wait_ready(scheduler, port)
            created = await setup(kube)
            seen_waiting = ""
            while True:
                placed = await placements(kube, namespace)
                if placed.get("train-0") and placed.get("train-1"):
                    break
                cond = await condition(kube, namespace, "train")
                if cond.get("type") == "Unschedulable":
                    seen_waiting = cond["message"]
                assert time.time() < created + 4 * WAIT + 20, scheduler.log_tail(40)
                await asyncio.sleep(0.1)
            bound = time.time()
            for _ in range(100):  # the status writer's next write
                cond = await condition(kube, namespace, "train")
                if cond.get("type") == "Scheduled":
                    break
                await asyncio.sleep(0.1)
        finally:
            scheduler.stop()
        assert "waiting for a tier rack domain" in seen_waiting, seen_waiting
        assert bound >= created + WAIT - 1.0  # whole-second creationTimestamp
        assert {fabric.rack_of(placed["train-0"]), fabric.rack_of(placed["train-1"])} == {
            f"{fabric.name}-s0-r0",
            f"{fabric.name}-s0-r1",
        }
        assert cond["type"] == "Scheduled", cond
        assert cond["message"] == (
            f"2 pods bound within {fabric.name}-s0; bounded wait: no tier rack placement "
            f"within {WAIT:g} s; took {fabric.name}-s0 (tier 2)"
        )
        assert cond["lastTransitionTime"]

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            await body(kube)

    asyncio.run(main())
