"""Live mode: the shared informers of ``tierra.kube`` feed the dashboard's store.

One informer per resource (Nodes, Pods, both HyperNode groups, Volcano PodGroups and
Queues) decodes each raw object with the same decoder a snapshot file uses, problems
included, and hands it to ``Dashboard.upsert`` / ``remove``; the view updates in place
where it can and the open page is told through the event stream. Resources the API
server does not serve (no Volcano CRDs, say) are left out once, at start, and named on
the page. While the API server is away the informers back off and resume; the page's
badge says what the last error was, and what it shows stays as it was last seen.

The configuration is read before the server starts (a bad kubeconfig is exit 2); the
client itself is made inside the server's event loop, where its connections live.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import Configuration

from tierra.api.hypernode import decode_hypernode
from tierra.api.node import decode_node
from tierra.api.pod import decode_pod
from tierra.api.podgroup import decode_podgroup
from tierra.api.queue import decode_queue
from tierra.errors import Problem
from tierra.kube.client import ApiError, Kube, load_configuration
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.resources import (
    NODES,
    PODS,
    TIERRA_HYPERNODES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    Resource,
)
from tierra.scheduler import SchedulerConfig
from tierra.web.app import Background
from tierra.web.model import Dashboard, Source
from tierra.web.store import Kind, Object, Store

POLL = 0.5  # seconds between looks at the informers' connection state
Decoded = tuple[Object, tuple[Problem, ...]]
RawDecoder = Callable[[Mapping[str, Any], Any, list[Problem]], Any]


@dataclass(frozen=True, slots=True)
class Watched:
    resource: Resource
    kind: Kind
    decode: RawDecoder
    required: bool  # core resources must be served; CRDs may be missing


WATCHED = (
    Watched(NODES, Kind.NODE, decode_node, True),
    Watched(PODS, Kind.POD, decode_pod, True),
    Watched(TIERRA_HYPERNODES, Kind.HYPERNODE, decode_hypernode, False),
    Watched(VOLCANO_HYPERNODES, Kind.HYPERNODE, decode_hypernode, False),
    Watched(VOLCANO_PODGROUPS, Kind.PODGROUP, decode_podgroup, False),
    Watched(VOLCANO_QUEUES, Kind.QUEUE, decode_queue, False),
)


def _decoder(w: Watched) -> Callable[[dict[str, Any]], Decoded]:
    def decode(raw: dict[str, Any]) -> Decoded:
        problems: list[Problem] = []
        obj = w.decode(raw, None, problems)
        # Metadata the page never reads (resourceVersion, managedFields, ...) changes with
        # every status write; without it an unchanged object compares equal and the store
        # ignores it, so a kubelet's heartbeat does not make every page refetch.
        if obj.meta.extra:
            obj = replace(obj, meta=replace(obj.meta, extra={}))
        return obj, tuple(problems)

    return decode


def _handler(dash: Dashboard, w: Watched) -> Callable[[Event[Decoded]], None]:
    def key(event_key: str) -> str:
        # HyperNodes are kept by group and name (both groups may hold one name).
        return f"{w.resource.group}/{event_key}" if w.kind is Kind.HYPERNODE else event_key

    def on_event(event: Event[Decoded]) -> None:
        if event.type is EventType.DELETED or event.obj is None:
            dash.remove(w.kind, key(event.key))
        else:
            obj, problems = event.obj
            dash.upsert(obj, problems)

    return on_event


async def _served(kube: Kube, w: Watched) -> bool:
    """Whether the API server serves ``w`` (a missing CRD is a 404)."""
    try:
        await kube.get(w.resource.path(), query={"limit": 1}, what=f"list {w.resource.name}")
    except ApiError as exc:
        return exc.status != 404 or w.required
    return True  # served; or refused, or the server is away: the informer says so


async def watch(dash: Dashboard, configuration: Configuration) -> None:
    """Run the informers into ``dash`` until cancelled, keeping the page told how it goes."""
    async with Kube(configuration) as kube:
        wanted = [w for w in WATCHED if await _served(kube, w)]
        missing = [w.resource.name for w in WATCHED if w not in wanted]
        informers = [
            Informer(kube, w.resource, _decoder(w), _handler(dash, w), name=w.resource.name)
            for w in wanted
        ]
        tasks = [asyncio.create_task(i.run()) for i in informers]
        try:
            while True:
                away = [i for i in informers if not i.connected and i.stats.last_error]
                dash.note_source(
                    synced=all(i.synced.is_set() for i in informers),
                    error=away[0].stats.last_error if away else "",
                    notServed=missing,
                )
                await asyncio.sleep(POLL)
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t


def live_dashboard(
    kubeconfig: Path,
    *,
    config: SchedulerConfig | None = None,
    report: Path | None = None,
) -> tuple[Dashboard, Background]:
    """A dashboard over the cluster ``kubeconfig`` names, and the coroutine that feeds it.

    Raises ``KubeConfigError`` when the file cannot be used."""
    configuration = asyncio.run(load_configuration(kubeconfig))
    described = f"{configuration.host} ({kubeconfig})"
    return dashboard_for(configuration, described, config=config, report=report)


def dashboard_for(
    configuration: Configuration,
    description: str,
    *,
    config: SchedulerConfig | None = None,
    report: Path | None = None,
) -> tuple[Dashboard, Background]:
    """A dashboard fed from an API server reached through ``configuration``."""
    source = Source("live", description, {"synced": False})
    dash = Dashboard(Store(), source=source, config=config, report=report)

    async def feed(d: Dashboard) -> None:
        await watch(d, configuration)

    return dash, feed
