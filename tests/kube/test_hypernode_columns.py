"""``kubectl get`` columns for HyperNodes: tier, tier name, parent, node count and a health
column that says Degraded for a degraded rack (it used to show the Ready condition,
True), in tierra's CRD and in tierra's rendition of Volcano's, with the status written as
the controller's status pass writes it."""

from __future__ import annotations

import asyncio
from typing import Any

from kube_helpers import kube_for

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, encode_hypernode
from tierra.api.meta import ObjectMeta
from tierra.api.node import Condition, Node
from tierra.discovery import health, labels
from tierra.kube.client import MERGE_PATCH
from tierra.kube.controller.status_patch import decode_stored, status_patch
from tierra.kube.controller.status_writer import parents_of
from tierra.kube.resources import TIERRA_HYPERNODES, VOLCANO_HYPERNODES
from tierra.kube.testing import ControlPlane

T0 = "2026-12-01T10:00:00Z"


def fabric(prefix: str) -> tuple[list[Node], Any]:
    """Two racks under one spine; one node of rack r1 NotReady."""
    nodes = [
        Node(
            meta=ObjectMeta(
                name=f"{prefix}-{i}", labels={"spine": f"{prefix}-s", "rack": f"{prefix}-r{i // 2}"}
            ),
            conditions=(Condition("Ready", "False" if i == 0 else "True"),),
        )
        for i in range(4)
    ]
    found = labels.discover_labels(nodes, [labels.make_topology(prefix, ["spine", "rack"])])
    return nodes, found.hypernodes


def columns(plane: ControlPlane, plural: str) -> dict[str, dict[str, str]]:
    """The table by the header's column positions (an empty cell is blank, not a word)."""
    out = plane.kubectl("get", plural).stdout.splitlines()
    head = out[0].split()
    starts = [out[0].index(h) for h in head] + [None]
    return {
        row.split()[0]: {
            h: row[a:b].strip() for h, a, b in zip(head, starts, starts[1:], strict=False)
        }
        for row in out[1:]
    }


def test_kubectl_get_shows_parent_and_health_degraded(crds: ControlPlane) -> None:
    nodes, hns = fabric("cols")
    rolled = health.rollup(hns, nodes)
    parents = parents_of(rolled)

    async def write() -> None:
        async with kube_for(crds) as kube:
            for group, resource in (
                (TIERRA_GROUP, TIERRA_HYPERNODES),
                (VOLCANO_GROUP, VOLCANO_HYPERNODES),
            ):
                for hn in rolled:
                    raw = await kube.request(
                        "POST", resource.path(), body=encode_hypernode(hn, group)
                    )
                    stored, _ = decode_stored(raw)
                    parent = parents.get(hn.name, "")
                    patch = status_patch(hn.status, stored, group, T0, parent=parent)
                    assert patch is not None
                    raw = await kube.request(
                        "PATCH",
                        resource.path(name=hn.name, subresource="status"),
                        body=patch,
                        content_type=MERGE_PATCH,
                    )
                    # what the API server kept makes the next pass write nothing
                    stored, _ = decode_stored(raw)
                    assert status_patch(hn.status, stored, group, T0, parent=parent) is None

    asyncio.run(write())
    mine = columns(crds, "hypernodes.topology.tierra.dev")
    rack0, rack1, spine = (
        mine["cols-cols-s-cols-r0"],
        mine["cols-cols-s-cols-r1"],
        mine["cols-cols-s"],
    )
    assert list(rack0) == ["NAME", "TIER", "TIERNAME", "PARENT", "NODES", "HEALTH", "AGE"]
    assert (rack0["TIER"], rack0["TIERNAME"], rack0["PARENT"]) == ("1", "rack", "cols-cols-s")
    assert (rack0["NODES"], rack0["HEALTH"]) == ("2", "Degraded")  # one of its nodes NotReady
    assert (rack1["PARENT"], rack1["HEALTH"]) == ("cols-cols-s", "Healthy")
    assert (spine["TIER"], spine["PARENT"], spine["HEALTH"]) == ("2", "", "Degraded")
    volcano = columns(crds, "hypernodes.topology.volcano.sh")
    vrack0 = volcano["cols-cols-s-cols-r0"]
    assert list(vrack0) == ["NAME", "TIER", "TIERNAME", "PARENT", "NODECOUNT", "HEALTH", "AGE"]
    assert (vrack0["PARENT"], vrack0["HEALTH"]) == ("cols-cols-s", "Degraded")
    assert volcano["cols-cols-s-cols-r1"]["HEALTH"] == "Healthy"
