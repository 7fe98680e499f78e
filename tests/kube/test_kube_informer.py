"""The client and the informer against the real API server: pagination, watch resumption,
relist on 410 Gone, bookmarks, and back-off while the server is away."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from kube_helpers import Cut, eventually, kube_for, running

from tierra.kube.client import ApiError, Kube, KubeConfigError, load_configuration
from tierra.kube.informer import Backoff, Event, EventType, Informer
from tierra.kube.resources import EVENTS, Resource
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)


def configmap(name: str, value: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


class Mirror:
    """What a consumer would keep: key -> the decoded value, plus every event seen."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}
        self.events: list[tuple[EventType, str]] = []

    def __call__(self, event: Event[str]) -> None:
        self.events.append((event.type, event.key))
        if event.type is EventType.DELETED:
            self.items.pop(event.key, None)
        else:
            assert event.obj is not None
            self.items[event.key] = event.obj


def value_of(raw: dict[str, Any]) -> str:
    return str(raw["data"]["v"])


async def create(kube: Kube, namespace: str, obj: dict[str, Any]) -> None:
    await kube.request("POST", CONFIGMAPS.path(namespace), body=obj)


def test_kubeconfig_loading(control_plane: ControlPlane, tmp_path: Path) -> None:
    async def body() -> None:
        config = await load_configuration(control_plane.kubeconfig)
        assert config.host == control_plane.url
        with pytest.raises(KubeConfigError, match="kubeconfig not found"):
            await load_configuration(tmp_path / "missing")
        broken = tmp_path / "broken"
        broken.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": []}))
        with pytest.raises(KubeConfigError, match=str(broken)):
            await load_configuration(broken)

    asyncio.run(body())


def test_errors_say_what_failed(control_plane: ControlPlane, namespace: str) -> None:
    async def body() -> None:
        async with kube_for(control_plane) as kube:
            with pytest.raises(ApiError) as missing:
                await kube.get(CONFIGMAPS.path(namespace, "nope"), what="read ConfigMap/nope")
            assert missing.value.status == 404 and missing.value.reason == "NotFound"
            assert "read ConfigMap/nope" in str(missing.value)
            assert not missing.value.retryable
        config = control_plane.client_configuration()
        config.host = "https://127.0.0.1:1"  # nothing listens there
        async with Kube(config) as away:
            with pytest.raises(ApiError) as gone:
                await away.get("/version")
            assert gone.value.status == 0 and gone.value.retryable

    asyncio.run(body())


def test_list_pages_then_watch_delivers_every_change(
    control_plane: ControlPlane, namespace: str
) -> None:
    async def body() -> Mirror:
        mirror = Mirror()
        async with kube_for(control_plane) as kube:
            for i in range(7):
                await create(kube, namespace, configmap(f"cm-{i}", str(i)))
            informer = Informer(
                kube, CONFIGMAPS, value_of, mirror, namespace=namespace, page_size=3
            )
            async with running(informer.run()):
                await asyncio.wait_for(informer.synced.wait(), 10)
                assert len(mirror.items) == 7  # three pages
                await create(kube, namespace, configmap("cm-new", "new"))
                await kube.request(
                    "PATCH",
                    CONFIGMAPS.path(namespace, "cm-0"),
                    body={"data": {"v": "changed"}},
                    content_type="application/merge-patch+json",
                )
                await kube.request("DELETE", CONFIGMAPS.path(namespace, "cm-1"))
                await eventually(
                    lambda: (
                        "changed" in mirror.items.values()
                        and f"{namespace}/cm-1" not in mirror.items
                        and f"{namespace}/cm-new" in mirror.items
                    ),
                    10,
                    "the changes",
                )
            assert informer.stats.lists == 1
        return mirror

    mirror = run(body())
    assert mirror.items[f"{namespace}/cm-0"] == "changed"
    assert len(mirror.items) == 7
    assert (EventType.DELETED, f"{namespace}/cm-1") in mirror.events
    assert (EventType.MODIFIED, f"{namespace}/cm-0") in mirror.events


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def compact_etcd(plane: ControlPlane) -> None:
    """Compact etcd to its current revision, as the API server does every 5 minutes."""

    def call(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            plane.etcd_url + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))

    revision = call("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
    call("/v3/kv/compaction", {"revision": revision})


def test_expired_resource_version_relists_and_reports_deletions(
    control_plane: ControlPlane, namespace: str
) -> None:
    """A version etcd has compacted away gives 410 Gone: the informer relists, and what
    vanished in the meantime is reported deleted. Events are not watch-cached by the API
    server, so their watches reach etcd and see the compaction."""

    def event(name: str) -> dict[str, Any]:
        ref = {"kind": "Pod", "name": "x", "namespace": namespace}
        return {
            "metadata": {"name": name},
            "involvedObject": ref,
            "reason": "Test",
            "message": name,
            "type": "Normal",
        }

    async def body() -> tuple[Mirror, int]:
        mirror = Mirror()
        async with kube_for(control_plane) as kube:
            await kube.request("POST", EVENTS.path(namespace), body=event("kept"))
            compact_etcd(control_plane)
            informer = Informer(
                kube, EVENTS, lambda raw: str(raw["message"]), mirror, namespace=namespace
            )
            informer.resource_version = "1"  # compacted away
            informer._known[f"{namespace}/vanished"] = "2"  # seen before, deleted since
            async with running(informer.run()):
                await asyncio.wait_for(informer.synced.wait(), 10)
            return mirror, informer.stats.relists_gone

    mirror, gone = run(body())
    assert gone == 1
    assert mirror.items == {f"{namespace}/kept": "kept"}
    assert (EventType.DELETED, f"{namespace}/vanished") in mirror.events


def test_bookmarks_move_the_resource_version(control_plane: ControlPlane, namespace: str) -> None:
    """Writes elsewhere move the server's version without events for this watch; a
    bookmark (sent shortly before the watch's timeout) carries it, and the informer
    resumes from there, with nothing redelivered and no relist."""

    async def body() -> tuple[Informer[str], Mirror, int]:
        mirror = Mirror()
        async with kube_for(control_plane) as kube:
            await create(kube, namespace, configmap("b"))
            informer = Informer(
                kube, CONFIGMAPS, value_of, mirror, namespace=namespace, watch_timeout=3
            )
            async with running(informer.run()):
                await asyncio.wait_for(informer.synced.wait(), 10)
                start = int(informer.resource_version)
                await kube.request(
                    "POST",
                    CONFIGMAPS.path("default"),
                    body={"metadata": {"generateName": "elsewhere-"}},
                )
                await eventually(
                    lambda: informer.stats.bookmarks >= 1 and informer.stats.watches >= 2,
                    60,
                    "a bookmark and a resumed watch",
                )
            return informer, mirror, start

    informer, mirror, start = run(body())
    assert int(informer.resource_version) > start
    assert informer.stats.lists == 1
    assert mirror.events == [(EventType.ADDED, f"{namespace}/b")]


def test_backs_off_while_the_server_is_away_and_catches_up(
    control_plane: ControlPlane, namespace: str
) -> None:
    async def body() -> tuple[Mirror, set[str], int]:
        mirror = Mirror()
        cut = Cut(control_plane.port)
        await cut.up()
        async with (
            kube_for(control_plane) as admin,
            kube_for(control_plane, host=cut.url) as through,
        ):
            await create(admin, namespace, configmap("before"))
            informer = Informer(
                through,
                CONFIGMAPS,
                value_of,
                mirror,
                namespace=namespace,
                backoff=Backoff(initial=0.05, maximum=0.4),
            )
            async with running(informer.run()):
                await asyncio.wait_for(informer.synced.wait(), 10)
                await cut.down()
                await create(admin, namespace, configmap("during"))
                await admin.request("DELETE", CONFIGMAPS.path(namespace, "before"))
                await eventually(lambda: informer.stats.errors >= 3, 10, "retries")
                assert not informer.connected
                await cut.up()
                await eventually(
                    lambda: set(mirror.items) == {f"{namespace}/during"},
                    10,
                    "catching up after the outage",
                )
            listing = await admin.get(CONFIGMAPS.path(namespace))
            actual = {f"{namespace}/{i['metadata']['name']}" for i in listing["items"]}
            return mirror, actual, informer.stats.errors

    mirror, actual, errors = run(body())
    assert set(mirror.items) == actual
    assert errors >= 3


def test_backoff_is_bounded_and_jittered() -> None:
    import random

    backoff = Backoff(initial=0.1, maximum=1.0, jitter=0.2, rng=random.Random(7))
    delays = [backoff.delay() for _ in range(10)]
    assert delays[0] == pytest.approx(0.1, rel=0.21)
    assert max(delays) <= 1.2
    assert delays[-1] >= 0.8
    backoff.reset()
    assert backoff.delay() <= 0.12
