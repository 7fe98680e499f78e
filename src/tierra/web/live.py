"""Live mode: the shared informers of ``tierra.kube`` feed the dashboard's store.

One informer per resource (Nodes, Pods, both HyperNode groups, Volcano PodGroups and
Queues, the upstream Workload API's PodGroups) decodes each raw object through
``tierra.api.decode`` (``Meta.READ``) with the same decoder a snapshot file uses,
problems included, and hands it to ``Dashboard.upsert`` / ``remove``; the view updates
in place where it can and the open page is told through the event stream. Upstream
PodGroups constrained by a node-label key are resolved as ``load_snapshot`` resolves
them (``tierra.api.workload.TopologyKeys``), so the page shows the same gangs and label
domains as a snapshot of the same cluster.

Resources the API server does not serve (no Volcano CRDs, the Workload API switched
off) are named on the page, and asked about again every ``RECHECK`` seconds: a CRD
installed later is watched from then on, one removed stops being watched and its
objects leave the page, without a restart. While the API server is away the informers
back off and resume; the page's badge says what the last error was, and what it shows
stays as it was last seen.

The configuration is read before the server starts (a bad kubeconfig is exit 2): a
``--kubeconfig`` file, else the in-cluster service account, else ``$KUBECONFIG`` or
``~/.kube/config`` (``tierra.kube.client.load_configuration``). The client itself is made
inside the server's event loop, where its connections live.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import Configuration

from tierra.api import decode as api_decode
from tierra.api.hypernode import decode_hypernode
from tierra.api.node import Node, decode_node
from tierra.api.pod import decode_pod
from tierra.api.podgroup import PodGroup, decode_podgroup
from tierra.api.queue import decode_queue
from tierra.api.workload import TopologyKeys, decode_workload_podgroup
from tierra.errors import Problem
from tierra.kube.client import ApiError, Kube, load_configuration
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.resources import (
    DRA,
    NODES,
    PODS,
    TIERRA_HYPERNODES,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
    WORKLOAD_PODGROUPS,
    Resource,
    served,
)
from tierra.scheduler import SchedulerConfig
from tierra.web import devices
from tierra.web.app import Background
from tierra.web.model import Dashboard, Source
from tierra.web.store import Kind, Object, Store, key_of

POLL = 0.5  # seconds between looks at the informers' connection state
RECHECK = 10.0  # seconds between asking the server about resources it does not serve
Decoded = tuple[Object, tuple[Problem, ...]]
RawDecoder = api_decode.Decoder[Any]


@dataclass(frozen=True, slots=True)
class Watched:
    resource: Resource
    kind: Kind
    decode: RawDecoder
    required: bool  # core resources must be served; CRDs and alpha APIs may be missing


WATCHED = (
    Watched(NODES, Kind.NODE, decode_node, True),
    Watched(PODS, Kind.POD, decode_pod, True),
    Watched(TIERRA_HYPERNODES, Kind.HYPERNODE, decode_hypernode, False),
    Watched(VOLCANO_HYPERNODES, Kind.HYPERNODE, decode_hypernode, False),
    Watched(VOLCANO_PODGROUPS, Kind.PODGROUP, decode_podgroup, False),
    Watched(WORKLOAD_PODGROUPS, Kind.PODGROUP, decode_workload_podgroup, False),
    Watched(VOLCANO_QUEUES, Kind.QUEUE, decode_queue, False),
)


def _decoder(w: Watched) -> Callable[[dict[str, Any]], Decoded]:
    def decode(raw: dict[str, Any]) -> Decoded:
        # Metadata the page never reads (resourceVersion, managedFields, ...) changes with
        # every status write; without it an unchanged object compares equal and the store
        # ignores it, so a kubelet's heartbeat does not make every page refetch.
        obj: Object
        obj, problems = api_decode.decode(w.decode, raw, meta=api_decode.Meta.READ)
        return obj, problems

    return decode


class Feed:
    """The informers of one API server into one dashboard, started and stopped as the
    server starts and stops serving their resources."""

    def __init__(self, dash: Dashboard, kube: Kube) -> None:
        self.dash = dash
        self.kube = kube
        self.running: dict[Watched, tuple[Informer[Decoded], asyncio.Task[None]]] = {}
        self.dra: dict[Resource, asyncio.Task[None]] = {}  # DRA kinds, into dash.devices
        self.missing: list[str] = []  # optional resources the server does not serve
        self.keys = TopologyKeys()
        self._unresolved = False  # keyed PodGroups, node labels or HyperNodes changed
        # store keys of what each optional resource brought (it may stop being served)
        self._from: dict[Watched, set[str]] = {w: set() for w in WATCHED if not w.required}

    async def run(self) -> None:
        """Watch until cancelled, telling the page how it goes."""
        loop = asyncio.get_running_loop()
        recheck = 0.0
        try:
            while True:
                if loop.time() >= recheck:
                    await self.discover()
                    recheck = loop.time() + RECHECK
                if self._unresolved:
                    self.resolve_keys()
                informers = [i for i, _ in self.running.values()]
                away = [i for i in informers if not i.connected and i.stats.last_error]
                self.dash.note_source(
                    synced=all(i.synced.is_set() for i in informers),
                    error=away[0].stats.last_error if away else "",
                    notServed=self.missing,
                )
                await asyncio.sleep(POLL)
        finally:
            for w in list(self.running):
                await self._stop(w)
            for task in self.dra.values():
                task.cancel()

    async def discover(self) -> None:
        """Start informers for what the server now serves; stop those it no longer does."""
        optional = [w.resource for w in WATCHED if not w.required]
        try:
            found = await served(self.kube, [*optional, *DRA])
        except ApiError:
            if self.running:
                return  # away: the informers say so; ask again later
            found = set()  # not reached yet: start the core informers, they retry
        for w in WATCHED:
            wanted = w.required or w.resource in found
            if wanted and w not in self.running:
                informer = Informer(
                    self.kube, w.resource, _decoder(w), self._handler(w), name=w.resource.name
                )
                self.running[w] = (informer, asyncio.create_task(informer.run()))
            elif not wanted and w in self.running:
                await self._stop(w)
                for key in sorted(self._from.get(w, ())):  # its objects went with it
                    self._removed(w, key)
        self.missing = [w.resource.name for w in WATCHED if w not in self.running]
        self._discover_devices(found)

    def _discover_devices(self, found: set[Resource]) -> None:
        """DRA's four kinds where all are served (``web/devices.py``): they feed the dry
        runs' devices, not the store, and a change only asks for new reasons."""
        wanted = set(DRA) <= found
        for res in DRA:
            if wanted and res not in self.dra:
                handle = self.dash.devices.handler(res.plural, self.dash.devices_changed)

                def on_event(e: Event[Any], handle: Callable[[str, Any], None] = handle) -> None:
                    handle(e.key, None if e.type is EventType.DELETED else e.obj)

                informer = Informer(
                    self.kube, res, devices.decoder(res.plural), on_event, name=res.name
                )
                self.dra[res] = asyncio.create_task(informer.run())
            elif not wanted and res in self.dra:
                self.dra.pop(res).cancel()

    async def _stop(self, w: Watched) -> None:
        _, task = self.running.pop(w)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def _handler(self, w: Watched) -> Callable[[Event[Decoded]], None]:
        def on_event(event: Event[Decoded]) -> None:
            if event.type is EventType.DELETED or event.obj is None:
                # HyperNodes are kept by group and name (both groups may hold one name).
                key = f"{w.resource.group}/{event.key}" if w.kind is Kind.HYPERNODE else event.key
                self._removed(w, key)
            else:
                self._upserted(w, *event.obj)

        return on_event

    def _upserted(self, w: Watched, obj: Object, problems: tuple[Problem, ...]) -> None:
        key = key_of(obj)
        if not w.required:
            self._from[w].add(key)
        if isinstance(obj, Node):
            old = self.dash.store.nodes.get(key)
            self._unresolved |= bool(self.keys.keyed) and (old is None or old.labels != obj.labels)
        elif w.kind is Kind.HYPERNODE:
            self._unresolved |= bool(self.keys.keyed)
        elif isinstance(obj, PodGroup):
            was_keyed = key in self.keys.keyed
            if self.keys.hold(obj):
                self._unresolved = True
                return  # upserted once its key is resolved
            self._unresolved |= was_keyed  # its label domains may no longer be needed
        self.dash.upsert(obj, problems)

    def _removed(self, w: Watched, key: str) -> None:
        self._from.get(w, set()).discard(key)
        if w.kind is Kind.PODGROUP and key in self.keys.keyed:
            self.keys.drop(key)
            self._unresolved = True
        elif w.kind in (Kind.NODE, Kind.HYPERNODE):
            self._unresolved |= bool(self.keys.keyed or self.keys.synthetic)
        self.dash.remove(w.kind, key)

    def resolve_keys(self) -> None:
        """Upstream PodGroups' label keys into tiers, and the label domains they need."""
        self._unresolved = False
        store = self.dash.store
        podgroups, extra, gone = self.keys.resolve(store.nodes.values(), store.hypernodes.values())
        for name in gone:
            self.dash.remove(Kind.HYPERNODE, f"{TIERRA_HYPERNODES.group}/{name}")
        for h in extra:
            self.dash.upsert(h)
        for pg in podgroups:
            self.dash.upsert(pg)


async def watch(dash: Dashboard, configuration: Configuration) -> None:
    """Run the informers into ``dash`` until cancelled."""
    async with Kube(configuration) as kube:
        await Feed(dash, kube).run()


def live_dashboard(
    kubeconfig: Path | None,
    *,
    config: SchedulerConfig | None = None,
    report: Path | None = None,
) -> tuple[Dashboard, Background]:
    """A dashboard over the cluster ``kubeconfig`` names (None: in-cluster, else
    ``$KUBECONFIG`` or ``~/.kube/config``), and the coroutine that feeds it.

    Raises ``KubeConfigError`` when no configuration can be used."""
    configuration = asyncio.run(load_configuration(kubeconfig))
    where = str(kubeconfig) if kubeconfig is not None else "in-cluster or default kubeconfig"
    described = f"{configuration.host} ({where})"
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
