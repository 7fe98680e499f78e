"""The scheduler's feed against the real API server: a HyperNode the API server accepts but
tierra finds wrong (a pattern RE2 cannot compile; no CRD schema can check that) reaches
the cache with its problems, and its tree is unusable with the reason -- as ``tierra
validate`` and ``tierra schedule`` treat the same object in a snapshot file -- until a
fixed version arrives."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kube_helpers import eventually, kube_for, running

from tierra.kube.client import MERGE_PATCH
from tierra.kube.resources import NODES, TIERRA_HYPERNODES
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, node_manifest
from tierra.scheduler.state.store import ClusterStore

pytestmark = pytest.mark.kube


def members(pattern: str) -> list[dict[str, Any]]:
    return [
        {"type": "Node", "selector": {"exactMatch": {"name": "feedbad-n0"}}},
        {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}},
    ]


def test_a_hypernode_with_an_error_makes_its_tree_unusable(crds: ControlPlane) -> None:
    async def body() -> tuple[bool, tuple[str, ...], bool, int]:
        async with kube_for(crds) as kube:
            for n in ("feedbad-n0", "feedbad-n1"):
                await kube.request("POST", NODES.path(), body=node_manifest(n, shape=NodeShape()))
            await kube.request(
                "POST",
                TIERRA_HYPERNODES.path(),
                body={
                    "apiVersion": "topology.tierra.dev/v1alpha1",
                    "kind": "HyperNode",
                    "metadata": {"name": "feedbad-rack"},
                    "spec": {"tier": 1, "members": members("^feedbad-n[1")},
                },
            )
            cache = ClusterStore()
            feed = Feed(
                kube, cache, scheduler_names=("tierra",), metrics=Metrics(), on_change=lambda: None
            )
            nodes, hypernodes = (
                next(i for i in feed.informers if i.resource == r)
                for r in (NODES, TIERRA_HYPERNODES)
            )
            watched = (nodes, hypernodes)

            def tree_of_rack() -> Any:
                ix = cache.index
                return ix.trees[int(ix.tree_of[ix.ix["feedbad-rack"]])]

            async with running(nodes.run()), running(hypernodes.run()):
                await eventually(lambda: all(i.synced.is_set() for i in watched), 20, "synced")
                await eventually(lambda: "feedbad-rack" in cache.index.ix, 10, "rack seen")
                broken = tree_of_rack()
                await kube.request(
                    "PATCH",
                    TIERRA_HYPERNODES.path(name="feedbad-rack"),
                    body={"spec": {"members": members("^feedbad-n[1]$")}},
                    content_type=MERGE_PATCH,
                )
                await eventually(lambda: tree_of_rack().usable, 10, "the fixed version used")
                rack = cache.index.ix["feedbad-rack"]
                return (
                    broken.usable,
                    broken.reasons,
                    tree_of_rack().usable,
                    len(cache.index.real_nodes[rack]),
                )

    usable_before, reasons, usable_after, size = asyncio.run(body())
    assert not usable_before
    assert any("spec.members[1].selector.regexMatch.pattern" in r for r in reasons)
    assert usable_after and size == 2
