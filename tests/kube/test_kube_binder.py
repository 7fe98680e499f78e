"""The binder against the real API server: 409 reconciled, 404 forgotten, evictions
through the Eviction API completed before the bindings handed over after them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kube_helpers import eventually, kube_for, running

from tierra.kube.client import Kube
from tierra.kube.resources import NODES, PODS
from tierra.kube.scheduler import decode
from tierra.kube.scheduler.binder import Binder
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.testing import ControlPlane
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest
from tierra.scheduler.result import Binding, Decision, Eviction, SessionResult
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Code

pytestmark = pytest.mark.kube


class Recording(Kube):
    """A real client that also notes the order of the requests it makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, str]] = []
        self.on_call: Any = None

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.calls.append((method, path))
        if self.on_call is not None:
            self.on_call(method, path)
        return await super().request(method, path, **kwargs)


async def cluster(kube: Kube, ns: str, prefix: str) -> tuple[list[str], dict[str, Any]]:
    nodes = [f"{prefix}-a", f"{prefix}-b"]
    for n in nodes:
        await kube.request(
            "POST", NODES.path(), body=node_manifest(n, shape=NodeShape(cpu="4", gpus=0))
        )
    pods: dict[str, Any] = {}
    for name in ("p1", "p2", "p3", "gone"):
        body = pod_manifest(name, ns, shape=PodShape(cpu="1"), scheduler_name="tierra")
        pods[name] = await kube.request("POST", PODS.path(ns), body=body)
    return nodes, pods


def test_conflicts_and_missing_pods_are_reconciled(
    control_plane: ControlPlane, namespace: str
) -> None:
    async def body() -> tuple[Binder, ClusterStore, Metrics, dict[str, str]]:
        async with kube_for(control_plane) as kube:
            (a, b), raw = await cluster(kube, namespace, "bind409")
            cache = ClusterStore()
            for n in (a, b):
                cache.upsert_node(decode.node(await kube.get(NODES.path(name=n))))
            for r in raw.values():
                cache.upsert_pod(decode.pod(r).pod)
            # p1 and p2 were bound to a by someone else (or an earlier attempt) already.
            for name in ("p1", "p2"):
                await kube.request(
                    "POST",
                    PODS.path(namespace, name, "binding"),
                    body={
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": name, "namespace": namespace},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": a},
                    },
                )
            await kube.request("DELETE", PODS.path(namespace, "gone"))
            key = f"{namespace}/"
            cache.assume(key + "p1", a)  # what we wanted: the answer was lost
            cache.assume(key + "p2", b)  # someone else won
            cache.assume(key + "p3", b)  # ordinary
            cache.assume(key + "gone", b)  # deleted meanwhile
            metrics = Metrics()
            feed = Feed(
                kube, cache, scheduler_names=("tierra",), metrics=metrics, on_change=lambda: None
            )
            binder = Binder(kube, feed, metrics)
            binder.submit(
                SessionResult(
                    bindings=tuple(
                        Binding(key + p, n, None)
                        for p, n in (("p1", a), ("p2", b), ("p3", b), ("gone", b))
                    )
                )
            )
            await binder.drain()
            placed = {
                p["metadata"]["name"]: p["spec"].get("nodeName", "")
                for p in (await kube.get(PODS.path(namespace)))["items"]
            }
            return binder, cache, metrics, placed

    binder, cache, metrics, placed = asyncio.run(body())
    a, b = "bind409-a", "bind409-b"
    assert placed == {"p1": a, "p2": a, "p3": b}
    assert (binder.bound, binder.failed) == (2, 2)
    assumed = {k.split("/")[1] for k in cache.assumed}
    assert assumed == {"p1", "p3"}  # confirmed by the watch later, not by the binder
    assert cache.pods[next(k for k in cache.pods if k.endswith("/p2"))].node_name == a
    assert not any(k.endswith("/gone") for k in cache.assumed)
    errors = "tierra_scheduler_bind_errors_total"
    assert metrics.registry.get_sample_value(errors, {"code": "409"}) == 2
    assert metrics.registry.get_sample_value(errors, {"code": "404"}) == 1


def test_evictions_complete_before_the_bindings_handed_over_after_them(
    control_plane: ControlPlane, crds: ControlPlane, namespace: str
) -> None:
    async def body() -> tuple[list[tuple[str, str]], list[bool], dict[str, str]]:
        config = control_plane.client_configuration()
        async with Recording(config) as kube:
            (a, _), _ = await cluster(kube, namespace, "evict")
            victim = pod_manifest(
                "victim", namespace, shape=PodShape(cpu="4"), scheduler_name="other"
            )
            victim["spec"]["nodeName"] = a
            await kube.request("POST", PODS.path(namespace), body=victim)
            cache = ClusterStore()
            metrics = Metrics()
            feed = Feed(
                kube, cache, scheduler_names=("tierra",), metrics=metrics, on_change=lambda: None
            )
            pods = next(i for i in feed.informers if i.resource == PODS)
            nodes = next(i for i in feed.informers if i.resource == NODES)
            key = f"{namespace}/"
            evicting_when_bound: list[bool] = []
            kube.on_call = lambda method, path: (
                evicting_when_bound.append(key + "victim" in feed.evicting)
                if path.endswith("/binding")
                else None
            )
            async with running(pods.run()), running(nodes.run()):
                await eventually(
                    lambda: pods.synced.is_set() and nodes.synced.is_set(), 10, "synced"
                )
                await eventually(lambda: key + "victim" in cache.pods, 10, "victim seen")
                cache.remove_pod(key + "victim")  # what the session's eviction does
                cache.assume(key + "p1", a)
                cache.assume(key + "p2", a)
                binder = Binder(kube, feed, metrics, eviction_timeout=20)
                # decisions handed over one by one, as a running session makes them: p2's
                # gang made no eviction, yet it may use the victim's room too
                binder.begin()
                binder.decided(
                    Decision(
                        key + "p1",
                        Code.SUCCESS,
                        0.001,
                        bindings=(Binding(key + "p1", a, None),),
                        evictions=(Eviction(key + "victim", a, "preempted by test"),),
                    )
                )
                binder.decided(
                    Decision(
                        key + "p2", Code.SUCCESS, 0.001, bindings=(Binding(key + "p2", a, None),)
                    )
                )
                await binder.drain()
            placed = {
                p["metadata"]["name"]: p["spec"].get("nodeName", "")
                for p in (await kube.get(PODS.path(namespace)))["items"]
            }
            return kube.calls, evicting_when_bound, placed

    calls, evicting_when_bound, placed = asyncio.run(body())
    order = [
        path.rsplit("/", 1)[1]
        for method, path in calls
        if method == "POST" and path.endswith(("/eviction", "/binding"))
    ]
    assert order == ["eviction", "binding", "binding"]
    assert evicting_when_bound == [False, False]  # the API had deleted the victim by then
    assert "victim" not in placed and placed["p1"] == placed["p2"] == "evict-a"
