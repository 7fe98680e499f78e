"""The preemption delay on a cluster (issue 21), ``tierra scheduler`` as a real process
against the real API server: a high-priority gang that can only run by preempting waits
the delay, counted from its pods' ``creationTimestamp``, so a scheduler restarted in the
middle of it goes on counting rather than starting again."""

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
from tierra.kube.resources import PODS, PRIORITY_CLASSES, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane, ManagedProcess
from tierra.kube.testing.fake import PodShape, pod_manifest

pytestmark = pytest.mark.kube
DELAY = 20.0


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes and Volcano's PodGroups are CRDs."""


async def priority_gang(
    kube: Kube,
    namespace: str,
    name: str,
    *,
    priority_class: str,
    nodes: list[str | None],
    scheduler: str,
    fabric: Fabric,
) -> None:
    """A Volcano gang of one 8-GPU pod per entry of ``nodes`` (a name: already bound)."""
    spec: dict[str, Any] = {"minMember": len(nodes), "priorityClassName": priority_class}
    spec["networkTopology"] = {"mode": "hard", "highestTierName": "rack"}
    await kube.request(
        "POST",
        VOLCANO_PODGROUPS.path(namespace),
        body={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        },
    )
    for i, node in enumerate(nodes):
        body = pod_manifest(
            f"{name}-{i}",
            namespace,
            shape=PodShape(cpu="1", gpus=8),
            scheduler_name=scheduler,
            node_selector=fabric.label,
            annotations={"scheduling.k8s.io/group-name": name},
        )
        body["spec"]["priorityClassName"] = priority_class
        if node is not None:
            body["spec"]["nodeName"] = node
        await kube.request("POST", PODS.path(namespace), body=body)


async def priority_class(kube: Kube, name: str, value: int) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    await kube.request("POST", PRIORITY_CLASSES.path(), body=body)


def test_the_delay_is_waited_out_across_a_scheduler_restart(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("delay", spines=1, racks=1, nodes=2)
    name = "tierra-e2e-delay"
    config = tmp_path / "config.yaml"
    config.write_text(f"preemption: {{enabled: true, delay: {DELAY:g}s}}\n")
    low, high = f"{name}-low", f"{name}-high"

    async def setup(kube: Kube) -> float:
        await fabric.create(kube)
        await priority_class(kube, low, 10)
        await priority_class(kube, high, 1000)
        await priority_gang(
            kube,
            namespace,
            "batch",
            priority_class=low,
            nodes=list(fabric.node_names()),
            scheduler=name,
            fabric=fabric,
        )
        await priority_gang(
            kube,
            namespace,
            "urgent",
            priority_class=high,
            nodes=[None, None],
            scheduler=name,
            fabric=fabric,
        )
        pod = await kube.get(PODS.path(namespace, "urgent-0"))
        created = parse_time(pod["metadata"]["creationTimestamp"])
        assert created is not None
        return created

    async def unschedulable(kube: Kube) -> list[dict[str, Any]]:
        group = await kube.get(VOLCANO_PODGROUPS.path(namespace, "urgent"))
        conditions = group.get("status", {}).get("conditions", [])
        return [c for c in conditions if c["type"] == "Unschedulable"]

    async def body(kube: Kube) -> None:
        # Ready before the gangs exist: the delay counts from the pods' creation, and on a
        # loaded machine a start-up after it would leave no waiting to see.
        first, port = start_scheduler(control_plane, tmp_path, name, "--config", str(config))
        processes: list[ManagedProcess] = [first]
        try:
            wait_ready(first, port)
            created = await setup(kube)
            await asyncio.sleep(max(0.0, created + DELAY / 2 - time.time()))
            placed = await placements(kube, namespace)
            assert placed["batch-0"] and placed["batch-1"], "evicted before the delay"
            assert not placed["urgent-0"], first.log_tail(20)
            (cond,) = await unschedulable(kube)
            assert "once it has waited the preemption delay" in cond["message"], cond
            assert f"of {DELAY:g} s left)" in cond["message"], cond
            first.stop()  # a restart half-way through the delay
            restarted = time.time()
            second, _ = start_scheduler(control_plane, tmp_path, name, "--config", str(config))
            processes.append(second)
            while True:
                placed = await placements(kube, namespace)
                if placed.get("urgent-0") and placed.get("urgent-1"):
                    break
                assert time.time() < restarted + 2 * DELAY, second.log_tail(40)
                await asyncio.sleep(0.1)
            bound = time.time()
        finally:
            for p in processes:
                p.stop()
        # creationTimestamp has whole seconds (truncated): the delay may end up to 1 s
        # early; counting from the restart instead would have bound no sooner than
        # restarted + DELAY.
        assert bound >= created + DELAY - 1.0
        assert bound < restarted + DELAY - 3.0, (bound - created, restarted - created)
        assert "batch-0" not in placed and "batch-1" not in placed  # preempted

    async def main() -> None:
        async with kube_for(control_plane) as kube:
            await body(kube)

    asyncio.run(main())
