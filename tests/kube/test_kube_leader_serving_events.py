"""Lease leader election, the probe/metrics server and rate-limited Events, against the
real API server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kube_helpers import Cut, eventually, kube_for, running
from prometheus_client import CollectorRegistry, Counter

from tierra.kube.events import WARNING, EventRecorder, ObjectRef
from tierra.kube.leader import LeaderElector
from tierra.kube.resources import EVENTS, LEASES
from tierra.kube.serving import Probes, Server
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube

FAST = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}


def work(timeline: list[tuple[float, str, str]], who: str) -> Any:
    """A leader's work: runs until cancelled, noting when it started and stopped."""

    async def lead() -> None:
        timeline.append((time.monotonic(), who, "start"))
        try:
            await asyncio.Event().wait()
        finally:
            timeline.append((time.monotonic(), who, "stop"))

    return lead


def test_one_leader_and_an_immediate_hand_over_on_release(
    control_plane: ControlPlane, namespace: str
) -> None:
    timeline: list[tuple[float, str, str]] = []

    async def body() -> tuple[list[bool], float, str]:
        async with kube_for(control_plane) as kube:
            a, b, c = (
                LeaderElector(kube, namespace=namespace, name="lock", identity=i, **FAST)
                for i in "abc"
            )
            async with running(a.run(work(timeline, "a"))) as task_a:
                await eventually(lambda: a.is_leader, 5, "a leads")
                async with running(b.run(work(timeline, "b"))), running(c.run(work(timeline, "c"))):
                    await asyncio.sleep(1.0)
                    before = [a.is_leader, b.is_leader, c.is_leader]
                    task_a.cancel()  # a clean stop releases the Lease
                    released = time.monotonic()
                    await eventually(lambda: b.is_leader or c.is_leader, 3, "a successor")
                    handover = time.monotonic() - released
                    await asyncio.sleep(0.5)
                    assert b.is_leader != c.is_leader
                    lease = await kube.get(LEASES.path(namespace, "lock"))
                    return before, handover, str(lease["spec"]["holderIdentity"])

    before, handover, holder = asyncio.run(body())
    assert before == [True, False, False]
    assert handover < 1.0  # released, not expired (the lease lasts 2 s)
    assert holder in {"b", "c"}
    assert [who for _, who, what in timeline if what == "start"] == ["a", holder]


def test_a_leader_cut_off_stops_before_another_takes_over(
    control_plane: ControlPlane, namespace: str
) -> None:
    timeline: list[tuple[float, str, str]] = []

    async def body() -> float:
        cut = Cut(control_plane.port)
        await cut.up()
        async with kube_for(control_plane, host=cut.url) as kc, kube_for(control_plane) as kb:
            c = LeaderElector(kc, namespace=namespace, name="lock2", identity="c", **FAST)
            b = LeaderElector(kb, namespace=namespace, name="lock2", identity="b", **FAST)
            async with running(c.run(work(timeline, "c"))):
                await eventually(lambda: c.is_leader, 5, "c leads")
                async with running(b.run(work(timeline, "b"))):
                    await asyncio.sleep(0.5)
                    assert not b.is_leader
                    await cut.down()  # c can no longer renew
                    died = time.monotonic()
                    await eventually(lambda: b.is_leader, 6, "b takes over")
                    return time.monotonic() - died

    takeover = asyncio.run(body())
    assert takeover < 2.0 + 1.0  # within the lease duration, plus a retry or two
    stops = {who: t for t, who, what in timeline if what == "stop"}
    starts = {who: t for t, who, what in timeline if what == "start"}
    assert stops["c"] < starts["b"], "two leaders worked at once"


def test_probes_and_metrics_on_one_port() -> None:
    registry = CollectorRegistry()
    binds = Counter("tierra_test_binds", "binds", registry=registry)
    binds.inc(3)
    state = {"synced": False}
    probes = Probes(
        live={"loop": lambda: None},
        ready={"informers": lambda: None if state["synced"] else "pods not synced"},
    )

    async def body() -> list[tuple[int, str]]:
        server = Server(probes, registry, host="127.0.0.1", port=0)
        await server.start()
        out = []
        try:
            async with aiohttp.ClientSession() as http:
                base = f"http://127.0.0.1:{server.port}"
                for path in ("/healthz", "/readyz", "/readyz?verbose", "/metrics"):
                    async with http.get(base + path) as r:
                        out.append((r.status, await r.text()))
                state["synced"] = True
                async with http.get(base + "/readyz") as r:
                    out.append((r.status, await r.text()))
        finally:
            await server.stop()
        return out

    healthz, readyz, verbose, metrics, ready = asyncio.run(body())
    assert healthz == (200, "ok")
    assert readyz[0] == 503 and "[-]informers pods not synced" in readyz[1]
    assert "[+]loop ok" in verbose[1]
    assert metrics[0] == 200 and "tierra_test_binds_total 3.0" in metrics[1]
    assert ready == (200, "ok")


def test_events_are_deduplicated_counted_and_rate_limited(
    control_plane: ControlPlane, namespace: str
) -> None:
    ref = ObjectRef("PodGroup", "scheduling.volcano.sh/v1beta1", "gang", namespace)

    async def body() -> tuple[list[dict[str, Any]], Any]:
        async with kube_for(control_plane) as kube:
            rec = EventRecorder(
                kube, component="tierra-test", qps=0.001, burst=3, repeat_interval=0.3
            )
            async with running(rec.run()):
                for _ in range(5):
                    rec.record(ref, WARNING, "Unschedulable", "no rack has 8 free GPUs")
                await rec.flush()
                await asyncio.sleep(0.35)
                rec.record(ref, WARNING, "Unschedulable", "no rack has 8 free GPUs")
                await rec.flush()
                rec.record(ref, WARNING, "Unschedulable", "another reason")  # 3rd token
                rec.record(ref, WARNING, "Unschedulable", "a third reason")  # over the limit
                await rec.flush()
            listing = await kube.get(EVENTS.path(namespace))
            return listing["items"], rec.stats

    items, stats = asyncio.run(body())
    by_message = {e["message"]: e for e in items}
    assert set(by_message) == {"no rack has 8 free GPUs", "another reason"}
    first = by_message["no rack has 8 free GPUs"]
    assert first["count"] == 6  # five folded into one object, then updated
    assert first["involvedObject"]["kind"] == "PodGroup"
    assert first["source"]["component"] == "tierra-test"
    assert (stats.created, stats.updated, stats.dropped) == (2, 1, 1)
