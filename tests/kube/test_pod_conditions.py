"""Pending gangs autoscalers can see, through the real API server and ``tierra scheduler``.

Every pending pod of a waiting gang carries ``PodScheduled=False``, reason
``Unschedulable``, the gang's reason as message, as kube-scheduler writes it; the write
happens once (sessions every 0.5 s and a restart add none); binding, through the
API server's ``pods/binding``, turns it ``True`` without reason or message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import (
    RACK_KEY,
    Fabric,
    metric,
    scrape,
    start_scheduler,
    volcano_gang,
    wait_bound,
    workload_gang,
)
from kube_helpers import eventually, kube_for

from tierra.kube.client import Kube
from tierra.kube.resources import NODES, PODS, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, node_manifest

pytestmark = pytest.mark.kube
WRITES = "tierra_scheduler_pod_condition_writes_total"


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes and Volcano's PodGroups are CRDs."""


def run(plane: ControlPlane, body: Callable[[Kube], Any]) -> Any:
    async def main() -> Any:
        async with kube_for(plane) as kube:
            return await body(kube)

    return asyncio.run(main())


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c["type"] == "PodScheduled":
            return dict(c)
    return None


def autoscaler_sees(pod: dict[str, Any]) -> bool:
    """cluster-autoscaler's reading of an unschedulable pod (utils/kubernetes/listers.go:
    not bound, not finished, not deleting, PodScheduled False with reason Unschedulable)."""
    cond = scheduled_condition(pod)
    return (
        not pod["spec"].get("nodeName")
        and pod["status"].get("phase") not in ("Succeeded", "Failed")
        and not pod["metadata"].get("deletionTimestamp")
        and cond is not None
        and cond["status"] == "False"
        and cond.get("reason") == "Unschedulable"
    )


async def gang_pods(kube: Kube, namespace: str, gang: str) -> list[dict[str, Any]]:
    body = await kube.get(PODS.path(namespace))
    return [p for p in body["items"] if p["metadata"]["name"].startswith(gang + "-")]


def test_waiting_gang_pods_get_podscheduled_false_once_and_true_on_binding(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    fabric = Fabric("podcond", spines=1, racks=1, nodes=2)  # one rack of 16 GPUs
    name = "tierra-podcond"
    hard = {"mode": "hard", "highestTierName": "rack"}

    async def setup(kube: Kube) -> None:
        await fabric.create(kube)
        await volcano_gang(kube, namespace, "fits", 2, scheduler=name, fabric=fabric)
        await volcano_gang(kube, namespace, "big", 6, scheduler=name, fabric=fabric, topology=hard)
        nowhere = {"mode": "hard", "highestTierName": "nowhere"}  # no node can help this one
        await volcano_gang(
            kube, namespace, "lost", 2, scheduler=name, fabric=fabric, topology=nowhere
        )
        # the upstream Workload API's gang, one rack by node label: 20 GPUs, 8 free (and too
        # many for the one node added first, below, so "big", older, gets both)
        await workload_gang(kube, namespace, "wl", 5, scheduler=name, fabric=fabric)

    run(control_plane, setup)
    scheduler, port = start_scheduler(control_plane, tmp_path, name)
    try:

        async def waiting(kube: Kube) -> tuple[list[dict[str, Any]], str]:
            await wait_bound(kube, namespace, 2, 30, scheduler)

            async def all_marked() -> bool:
                return all(autoscaler_sees(p) for p in await gang_pods(kube, namespace, "big"))

            await eventually(all_marked, 30, "every pod of the waiting gang marked")

            async def upstream_marked() -> bool:
                return all(autoscaler_sees(p) for p in await gang_pods(kube, namespace, "wl"))

            await eventually(upstream_marked, 30, "every pod of the upstream gang marked")

            async def lost_marked() -> bool:
                pods = await gang_pods(kube, namespace, "lost")
                conds = [scheduled_condition(p) or {} for p in pods]
                return all(c.get("reason") == "UnschedulableAndUnresolvable" for c in conds)

            await eventually(lost_marked, 30, "the gang no node can help marked, not Unschedulable")
            for p in await gang_pods(kube, namespace, "lost"):
                assert not autoscaler_sees(p)  # explained, but no scale-up for it
            pg = await kube.get(VOLCANO_PODGROUPS.path(namespace, "big"))
            return await gang_pods(kube, namespace, "big"), pg["status"]["conditions"][0]["message"]

        pods, reason = run(control_plane, waiting)
        assert len(pods) == 6 and "rack" in reason
        for p in pods:
            cond = scheduled_condition(p)
            assert cond is not None
            assert cond["message"] == reason  # the gang's reason, as its PodGroup says it
            assert cond["lastTransitionTime"] and cond.get("lastProbeTime") is None
        versions = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods}

        def sessions() -> float:
            return metric(scrape(port)[1], "tierra_scheduler_sessions_total")

        async def quiet(kube: Kube) -> dict[str, str]:
            start = sessions()
            await eventually(lambda: sessions() >= start + 6, 30, "six more sessions")
            return {
                p["metadata"]["name"]: p["metadata"]["resourceVersion"]
                for p in await gang_pods(kube, namespace, "big")
            }

        assert run(control_plane, quiet) == versions  # no write storm
        assert metric(scrape(port)[1], WRITES) == 13  # "big" 6, "lost" 2, "wl" 5
        fitted = run(control_plane, lambda k: gang_pods(k, namespace, "fits"))
        for p in fitted:  # bound: the API server's binding set True, no reason
            cond = scheduled_condition(p)
            assert cond is not None and cond["status"] == "True" and "reason" not in cond
            assert not autoscaler_sees(p)
    finally:
        scheduler.stop()

    # A restart reads the conditions back and writes nothing new.
    scheduler, port = start_scheduler(control_plane, tmp_path, name)
    try:
        assert run(control_plane, quiet) == versions
        assert metric(scrape(port)[1], WRITES) == 0

        # Room appears (what the autoscaler would add): the gang binds, every condition True.
        async def grow(kube: Kube) -> list[dict[str, Any]]:
            rack = fabric.rack_of(fabric.node_names()[0])
            labels = {**fabric.label, RACK_KEY: rack}
            shape = NodeShape(cpu="64", memory="512Gi", gpus=8)
            for extra in (f"{rack}-8", f"{rack}-9"):  # 16 GPUs used, 24 wanted: 32 in all
                body = node_manifest(extra, shape=shape, labels=labels)
                await kube.request("POST", NODES.path(), body=body)
            await wait_bound(kube, namespace, 8, 60, scheduler)
            return await gang_pods(kube, namespace, "big")

        for p in run(control_plane, grow):
            cond = scheduled_condition(p)
            assert cond is not None and cond["status"] == "True", cond
            assert "message" not in cond and not autoscaler_sees(p)
    finally:
        scheduler.stop()
