"""Kueue's TAS hot swap e2e cases (``test/e2e/tas/baseline/hotswap_test.go`` at v0.19.2)
with ``tierra scheduler`` on Kueue's e2e cluster (``kueue_kind.py``), the Job
controller recreating lost pods, the taint-eviction controller evicting from
``NoExecute``-tainted nodes.

Kueue replaces a failed node of a running workload by a node of the same domain, and
evicts the workload when there is none. tierra places a running gang's replacement pods
beside its survivors (node repair); when no node there has room, the replacement waits
with the reason and the survivors keep running (tierra does not evict a gang to move it:
the one case where Kueue evicts is followed with that difference asserted). Each test
restores the node it broke, as Kueue's ``AfterEach`` does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kueue_kind import (
    BLOCK,
    PREFERRED,
    RACK,
    REQUIRED,
    SLICE,
    SLICE_SIZE,
    WORKERS,
    Kind,
    condition,
    job,
    kind,
    pods,
    wait_pods,
    worker_node,
)

from tierra.kube.client import MERGE_PATCH, Kube
from tierra.kube.resources import NODES, PODS

__all__ = ["kind"]  # the module's fixture
pytestmark = pytest.mark.kube
W = WORKERS


async def nodes_now(kube: Kube, ns: str, count: int, timeout: float = 60) -> set[str]:
    """The nodes of the namespace's live pods once ``count`` of them are bound."""
    items = await wait_pods(kube, ns, count, timeout=timeout)
    return {p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")}


async def pod_on(kube: Kube, ns: str, node: str) -> str:
    (name,) = [
        p["metadata"]["name"] for p in await pods(kube, ns) if p["spec"].get("nodeName") == node
    ]
    return str(name)


async def until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.2)


async def set_taints(kube: Kube, node: str, taints: list[dict[str, str]]) -> None:
    patch = {"spec": {"taints": taints or None}}
    await kube.request("PATCH", NODES.path(name=node), body=patch, content_type=MERGE_PATCH)


async def set_ready(kube: Kube, node: str, status: str) -> None:
    body = await kube.get(NODES.path(name=node))
    conditions = [c for c in body["status"]["conditions"] if c["type"] != "Ready"]
    conditions.append({"type": "Ready", "status": status, "reason": "e2e", "message": "e2e"})
    patch = {"status": {"conditions": conditions}}
    await kube.request(
        "PATCH", NODES.path(name=node) + "/status", body=patch, content_type=MERGE_PATCH
    )


def restore(kind: Kind, node: str) -> None:
    """The node as the cluster made it (Kueue's ``AfterEach`` re-creates it)."""
    i = W.index(node)
    kind.plane.kubectl("delete", "node", node, "--ignore-not-found", "--wait=true")

    async def create(kube: Kube) -> None:
        await kube.request("POST", NODES.path(), body=worker_node(i))

    kind.run(create)


def test_replace_a_failed_node_within_the_same_domain(kind: Kind) -> None:
    """ "Should replace a failed node with a new one within the same domain": three pods,
    block preferred, one slice of three per block: kind-worker .. kind-worker3; the node
    of the pod on kind-worker is deleted (its pod goes, as the pod garbage collector
    removes pods of a deleted node), the Job makes a new pod, and the gang is on
    kind-worker2 .. kind-worker4."""
    ns = kind.namespace("hs-replace")
    ann = {PREFERRED: BLOCK, SLICE: BLOCK, SLICE_SIZE: "3"}
    kind.apply(job("ranks-job", ns, parallelism=3, annotations=ann))

    async def body(kube: Kube) -> None:
        assert await nodes_now(kube, ns, 3) == set(W[:3])
        lost = await pod_on(kube, ns, W[0])
        await kube.request("DELETE", NODES.path(name=W[0]))
        await kube.request("DELETE", PODS.path(ns, lost), query={"gracePeriodSeconds": 0})

        async def moved() -> bool:
            got = await nodes_now(kube, ns, 3)
            return got == set(W[1:4])

        await until(moved, 60, "the replacement on kind-worker4")

    try:
        kind.run(body)
    finally:
        kind.clean(ns)
        restore(kind, W[0])


def test_no_replacement_in_the_rack_the_replacement_waits(kind: Kind) -> None:
    """ "Should evict the workload if replacement is not possible": two pods, block
    preferred, one slice of two per rack: kind-worker and kind-worker2 (rack r1); the
    node of the pod on kind-worker is deleted. No node of r1 is left for the replacement:
    Kueue evicts the workload and admits it again on kind-worker3 and kind-worker4;
    tierra keeps the survivor on kind-worker2 and the replacement waits, saying why."""
    ns = kind.namespace("hs-evict")
    ann = {PREFERRED: BLOCK, SLICE: RACK, SLICE_SIZE: "2"}
    kind.apply(job("ranks-job", ns, parallelism=2, annotations=ann))

    async def body(kube: Kube) -> None:
        assert await nodes_now(kube, ns, 2) == set(W[:2])
        lost = await pod_on(kube, ns, W[0])
        await kube.request("DELETE", NODES.path(name=W[0]))
        await kube.request("DELETE", PODS.path(ns, lost), query={"gracePeriodSeconds": 0})

        async def waiting() -> dict[str, Any] | None:
            live = [p for p in await pods(kube, ns) if not p["spec"].get("nodeName")]
            if not live:
                return None
            cond = await condition(kube, ns, live[0]["metadata"]["name"])
            return cond if cond and cond["status"] == "False" else None

        cond = await until(waiting, 60, "the replacement's PodScheduled=False")
        assert "node repair" in cond["message"] or RACK in cond["message"], cond
        await asyncio.sleep(2)  # sessions every 0.5 s: it had its chances
        assert await nodes_now(kube, ns, 1) == {W[1]}  # the survivor stays

    try:
        kind.run(body)
    finally:
        kind.clean(ns)
        restore(kind, W[0])


TAINT = {"key": "key1", "value": "value1", "effect": "NoExecute"}


def test_replace_a_node_tainted_noexecute_tolerated_for_a_while(kind: Kind) -> None:
    """ "Should replace a node when it becomes tainted with NoExecute and
    tolerationSeconds": three pods, block required, tolerating key1=value1:NoExecute for
    0 s: kind-worker .. kind-worker3; kind-worker is tainted, the taint-eviction
    controller evicts its pod, the Job makes a new one, and it goes to kind-worker4 (not
    back to the tainted node, where the taint would evict it again)."""
    ns = kind.namespace("hs-noexecute")
    toleration = {**TAINT, "operator": "Equal", "tolerationSeconds": 0}
    spec = {"tolerations": [toleration]}
    kind.apply(job("toleration-job", ns, parallelism=3, indexed=True,
                   annotations={REQUIRED: BLOCK}, pod_spec=spec))  # fmt: skip

    async def body(kube: Kube) -> None:
        assert await nodes_now(kube, ns, 3) == set(W[:3])
        await set_taints(kube, W[0], [TAINT])

        async def moved() -> bool:
            return await nodes_now(kube, ns, 3) == set(W[1:4])

        await until(moved, 60, "the replacement on kind-worker4")

    try:
        kind.run(body)
    finally:
        kind.clean(ns)
        restore(kind, W[0])


def test_replace_a_node_not_ready_while_pods_are_pending(kind: Kind) -> None:
    """ "Should replace a node when it becomes NotReady and pods are Pending": three
    pods, block required, held by a scheduling gate; kind-worker becomes NotReady; once
    the gate is removed, no pod goes to it. Kueue had assigned kind-worker ..
    kind-worker3 before the failure and swaps the failed node for kind-worker4; tierra
    places gated pods only once the gate goes, as a new gang, and a new gang avoids a
    degraded domain: the three take block b2 (kind-worker5 .. kind-worker7)."""
    ns = kind.namespace("hs-notready")
    spec = {"schedulingGates": [{"name": "kueue.x-k8s.io/dummy-gate"}]}
    kind.apply(job("pending-notready-job", ns, parallelism=3, indexed=True,
                   annotations={REQUIRED: BLOCK}, pod_spec=spec))  # fmt: skip

    async def body(kube: Kube) -> None:
        items = await wait_pods(kube, ns, 3, bound=False)
        await set_ready(kube, W[0], "Unknown")
        await asyncio.sleep(1)  # the scheduler sees the node NotReady
        for p in items:
            patch = {"spec": {"schedulingGates": None}}
            await kube.request("PATCH", PODS.path(ns, p["metadata"]["name"]),
                               body=patch, content_type=MERGE_PATCH)  # fmt: skip
        assert await nodes_now(kube, ns, 3) == set(W[4:7])

    try:
        kind.run(body)
    finally:
        kind.clean(ns)
        restore(kind, W[0])


def test_replace_a_node_tainted_noschedule_when_its_pod_fails(kind: Kind) -> None:
    """ "Should replace a node when it becomes tainted with NoSchedule and pod fails":
    three pods, block required: kind-worker .. kind-worker3; kind-worker gets a
    NoSchedule taint (running pods stay), then its pod fails (is deleted): the Job's new
    pod goes to kind-worker4, in the same block."""
    ns = kind.namespace("hs-noschedule")
    kind.apply(job("noschedule-job", ns, parallelism=3, indexed=True,
                   annotations={REQUIRED: BLOCK}))  # fmt: skip

    async def body(kube: Kube) -> None:
        assert await nodes_now(kube, ns, 3) == set(W[:3])
        await set_taints(kube, W[0], [{**TAINT, "effect": "NoSchedule"}])
        await asyncio.sleep(1)
        assert await nodes_now(kube, ns, 3) == set(W[:3])  # NoSchedule: the pod stays
        lost = await pod_on(kube, ns, W[0])
        await kube.request("DELETE", PODS.path(ns, lost), query={"gracePeriodSeconds": 0})

        async def moved() -> bool:
            return await nodes_now(kube, ns, 3) == set(W[1:4])

        await until(moved, 60, "the replacement on kind-worker4")

    try:
        kind.run(body)
    finally:
        kind.clean(ns)
        restore(kind, W[0])
