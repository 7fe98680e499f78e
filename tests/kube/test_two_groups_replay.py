"""A cluster holding both HyperNode groups, through the real API server: tierra's
controller writes its topology into both (the Volcano copies are its mirror), and two
different ``idn-hand-a`` are made by hand, one per group. The live ``tierra scheduler``
binds; ``tierra snapshot`` of the same cluster replayed by ``tierra schedule`` gives the
same placement, pod for pod, says which group it schedules by, and never mixes the two
``idn-hand-a``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from e2e_cluster import (
    Fabric,
    hypernode,
    read,
    start_scheduler,
    tierra,
    volcano_gang,
    wait_bound,
)
from kube_helpers import eventually, kube_for, running

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP
from tierra.discovery.result import MANAGED_BY
from tierra.kube.client import ApiError, Kube
from tierra.kube.controller import app
from tierra.kube.controller.config import parse_config
from tierra.kube.controller.metrics import Metrics
from tierra.kube.resources import NODES, TIERRA_HYPERNODES, VOLCANO_HYPERNODES, VOLCANO_PODGROUPS
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, node_manifest

pytestmark = pytest.mark.kube

KEY = "idn.tierra.dev"
MIRRORED = Fabric("idn-mir")  # only its label is used: the nodes are made here
HAND = Fabric("idn-hand")
SCHEDULER = "tierra-e2e-identity"


@pytest.fixture(autouse=True)
def _crds_installed(crds: ControlPlane) -> None:
    """HyperNodes of both groups and Volcano's PodGroups are CRDs."""


async def make_nodes(kube: Kube) -> None:
    shape = NodeShape(cpu="64", memory="512Gi", gpus=8)
    for i in range(8):  # two blocks of two racks of two nodes, for the controller's labels
        labels = {**MIRRORED.label, f"{KEY}/block": f"b{i // 4}", f"{KEY}/rack": f"r{i // 2}"}
        body = node_manifest(f"idn-mir-{i}", shape=shape, labels=labels)
        await kube.request("POST", NODES.path(), body=body)
    for i in range(4):
        body = node_manifest(f"idn-hand-{i}", shape=shape, labels=HAND.label)
        await kube.request("POST", NODES.path(), body=body)


async def mirror_with_the_controller(plane: ControlPlane, kube: Kube, namespace: str) -> None:
    """tierra's controller, configured to write both groups, until both hold its six."""
    config = parse_config(
        {
            "groups": ["tierra", "volcano"],
            "debounce": 0.05,
            "sources": [
                {
                    "name": "labels",
                    "owner": "idn",
                    "levels": [f"idn={KEY}/block,{KEY}/rack"],
                    "tierNames": {f"{KEY}/block": "idn-block", f"{KEY}/rack": "idn-rack"},
                }
            ],
        }
    )
    options = app.Options(
        kubeconfig=plane.kubeconfig,
        namespace=namespace,
        config=config,
        leader_elect=False,
        metrics_port=0,
        health_port=0,
        bind_address="127.0.0.1",
    )

    async def six_in_each() -> bool:
        for resource in (TIERRA_HYPERNODES, VOLCANO_HYPERNODES):
            query = {"labelSelector": f"{MANAGED_BY}=idn"}
            try:
                found = (await kube.get(resource.path(), query=query))["items"]
            except ApiError as exc:  # 429 while a fresh CRD's storage initializes
                if exc.status != 429:
                    raise
                return False
            if len(found) != 6:
                return False
        return True

    async with running(app.serve(options, metrics=Metrics())):
        await eventually(six_in_each, 30, "the controller's six HyperNodes in both groups")


async def two_hand_made_racks(kube: Kube) -> None:
    """``idn-hand-a`` in each group over different nodes, no managed-by: two HyperNodes."""
    for resource, nodes in ((TIERRA_HYPERNODES, (0, 1)), (VOLCANO_HYPERNODES, (2, 3))):
        members = [
            {"type": "Node", "selector": {"exactMatch": {"name": f"idn-hand-{i}"}}} for i in nodes
        ]
        body = hypernode("idn-hand-a", 1, "idn-hand", members)
        body["apiVersion"] = f"{resource.group}/v1alpha1"
        await kube.request("POST", resource.path(), body=body)


async def gangs(kube: Kube, namespace: str) -> None:
    def hard(tier: str) -> dict[str, str]:
        return {"mode": "hard", "highestTierName": tier}

    for g in range(2):  # each fills one controller-made rack
        await volcano_gang(
            kube, namespace, f"rack-{g}", 2, scheduler=SCHEDULER, fabric=MIRRORED, gpus=8,
            topology=hard("idn-rack"),
        )  # fmt: skip
    await volcano_gang(
        kube, namespace, "block", 4, scheduler=SCHEDULER, fabric=MIRRORED, gpus=4,
        topology=hard("idn-block"),
    )  # fmt: skip
    for g in range(2):  # one in each idn-hand-a: both exist, neither hides the other
        await volcano_gang(
            kube, namespace, f"hand-{g}", 2, scheduler=SCHEDULER, fabric=HAND, gpus=8,
            topology=hard("idn-hand"),
        )  # fmt: skip
    await asyncio.sleep(1.1)  # created a second later: tried last offline, as live
    await volcano_gang(
        kube, namespace, "hand-more", 1, scheduler=SCHEDULER, fabric=HAND, gpus=8,
        topology=hard("idn-hand"),
    )  # fmt: skip


def test_a_two_group_cluster_replays_offline_as_the_live_scheduler_placed_it(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    async def setup() -> None:
        async with kube_for(control_plane) as kube:
            await make_nodes(kube)
            await mirror_with_the_controller(control_plane, kube, namespace)
            await two_hand_made_racks(kube)
            await gangs(kube, namespace)

    asyncio.run(setup())

    snap = tmp_path / "snap"
    dumped = tierra("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "-o", str(snap))
    assert dumped.returncode == 0, dumped.stderr
    files = sorted(str(p) for p in snap.glob("*.json"))
    offline = tierra("schedule", *files, "--scheduler-name", SCHEDULER, "-o", "json")
    assert offline.returncode == 0, offline.stderr
    err = " ".join(offline.stderr.split())
    assert "defined twice" not in err
    # (other tests' mirrors share the cluster: the count and the owners are at least ours)
    assert "topology.volcano.sh HyperNodes mirror topology.tierra.dev's (managed by" in err
    assert "'idn'" in err.split("mirror topology.tierra.dev's", 1)[1]
    decided = json.loads(offline.stdout)
    mine = [b for b in decided["bindings"] if b["pod"].startswith(f"{namespace}/")]
    expected = {b["pod"].split("/")[1]: b["node"] for b in mine}
    waiting = {u["podGroup"]: u["reason"] for u in decided["unschedulable"]}
    assert len(expected) == 2 + 2 + 4 + 2 + 2
    assert set(waiting) & {f"{namespace}/{g}" for g in ("rack-0", "block", "hand-0")} == set()
    assert f"{namespace}/hand-more" in waiting
    where = {b["pod"].split("/")[1]: (b["hyperNode"], b.get("hyperNodeGroup")) for b in mine}
    hand = {where[f"hand-{g}-0"] for g in range(2)}
    assert hand == {("idn-hand-a", TIERRA_GROUP), ("idn-hand-a", VOLCANO_GROUP)}
    assert where["rack-0-0"][0].startswith("idn-b") and where["rack-0-0"][1] is None

    process, _ = start_scheduler(control_plane, tmp_path, SCHEDULER)
    try:

        async def check() -> dict[str, Any]:
            async with kube_for(control_plane) as kube:
                placed = await wait_bound(kube, namespace, len(expected), 60, process)

                async def status_of(name: str) -> dict[str, Any]:
                    pg = await read(kube, VOLCANO_PODGROUPS.path(namespace, name))
                    return dict((pg or {}).get("status") or {})

                async def written() -> bool:
                    return bool((await status_of("hand-more")).get("conditions")) and all(
                        [(await status_of(f"hand-{g}")).get("conditions") for g in range(2)]
                    )

                await eventually(written, 20, "PodGroup status written")
                return {
                    "placed": {p: n for p, n in placed.items() if n},
                    **{g: await status_of(g) for g in ("hand-0", "hand-1", "hand-more")},
                }

        seen = asyncio.run(check())
        log = process.log_tail(400)
    finally:
        process.stop()

    # The same placement live and offline, pod for pod.
    assert seen["placed"] == expected
    # The live scheduler says which group it schedules by, and names each hand-made rack
    # by its group; the one that waits has the offline reason.
    assert "scheduling by topology.tierra.dev, whose copies carry link and health" in log
    bound_within = {c["message"] for g in ("hand-0", "hand-1") for c in seen[g]["conditions"]}
    assert any("within topology.tierra.dev/idn-hand-a" in m for m in bound_within)
    assert any("within topology.volcano.sh/idn-hand-a" in m for m in bound_within)
    (cond,) = seen["hand-more"]["conditions"]
    assert cond["message"] == waiting[f"{namespace}/hand-more"]
