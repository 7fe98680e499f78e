"""The informers and the core's cache they feed, one event at a time.

Every watched resource has an informer whose events become ``upsert_*`` / ``remove_*``
calls on the cache (CONTRACTS.md section 1). A session runs in a worker thread over a view
of the store (``tierra.scheduler.state.view``); changes keep being applied to the store as
they arrive (the first one forks the store between two gangs of the session, which goes on
over what it saw when it started), and the event loop keeps reading watches and posting
bindings.
Every (re)list is applied inside ``cache.batch()``, so a 5,000-node list rebuilds the
topology index once, not 5,000 times.

What the adapter keeps beside the cache is small and about the API, not placement: when
each pending pod was created (for the created-to-bound metric), which API each PodGroup
came from (status is written back there), and the pods being evicted (the session has
already released their room; until the API deletes them their updates are not fed back).

Upstream PodGroups constrained by a node-label key are resolved here as ``load_snapshot``
resolves them (``tierra.api.workload``), so the live scheduler and ``tierra schedule`` on
a snapshot of the same cluster see the same gangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tierra.api.hypernode import TIERRA_GROUP, HyperNode, HyperNodeKey
from tierra.api.kueue import PREFIX as KUEUE_PREFIX
from tierra.api.kueue import level_keys
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.api.tierra_annotations import annotation_levels
from tierra.api.workload import SYNTHETIC_ANNOTATION, resolve_topology_keys, topology_key
from tierra.bulk import building
from tierra.errors import Problem
from tierra.kube import resources as r
from tierra.kube.client import Kube
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.scheduler import decode
from tierra.kube.scheduler.decode import LivePod
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.scheduler.storage_feed import handlers as storage_handlers
from tierra.scheduler.constraints.kueue_resolve import wanted_forest
from tierra.topology.index import TopologyIndex

log = logging.getLogger(__name__)
# Pods and Nodes come by the hundred thousand: typed off the wire, lean metadata only
# (``tierra.kube.wire``); every decoder here reads lean metadata anyway.
LEAN = frozenset({r.PODS, r.NODES})


class CacheApi(Protocol):
    """The part of ``tierra.scheduler.state.store.ClusterStore`` the Kubernetes layer uses."""

    pods: dict[str, Pod]
    podgroups: dict[str, PodGroup]
    members: dict[str, dict[str, None]]
    assumed: set[str]
    hypernodes: dict[HyperNodeKey, HyperNode]
    index: TopologyIndex
    extensions: dict[str, object]
    generation: int

    @property
    def nodes(self) -> list[Node]: ...

    def node(self, name: str) -> Node | None: ...
    def batch(self) -> contextlib.AbstractContextManager[Any]: ...
    def feeding(self) -> contextlib.AbstractContextManager[None]: ...
    def upsert_node(self, node: Node) -> None: ...
    def remove_node(self, name: str) -> None: ...
    def upsert_pod(self, pod: Pod) -> None: ...
    def remove_pod(self, key: str) -> None: ...
    def upsert_podgroup(self, pg: PodGroup) -> None: ...
    def remove_podgroup(self, key: str) -> None: ...
    def upsert_queue(self, q: Queue) -> None: ...
    def remove_queue(self, name: str) -> None: ...
    def upsert_hypernode(self, h: HyperNode, problems: Iterable[Problem] = ()) -> None: ...
    def remove_hypernode(self, name: str, group: str = TIERRA_GROUP) -> None: ...
    def upsert_priority_class(self, name: str, value: int) -> None: ...
    def remove_priority_class(self, name: str) -> None: ...
    def assume(self, pod_key: str, node: str) -> None: ...
    def forget(self, pod_key: str) -> None: ...


@dataclass(frozen=True, slots=True)
class GroupSource:
    """Where a PodGroup lives in the API, for status and Events."""

    resource: r.Resource
    uid: str


class Feed:
    """Informers -> cache; ``on_change`` is called when a session may have new work."""

    def __init__(
        self,
        kube: Kube,
        cache: CacheApi,
        *,
        scheduler_names: tuple[str, ...],
        metrics: Metrics,
        on_change: Callable[[], None],
        served: set[r.Resource] | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.scheduler_names = frozenset(scheduler_names)
        self.metrics = metrics
        self.on_change = on_change
        self.created: dict[str, float] = {}  # pending pods of ours -> creation time
        self.sources: dict[str, GroupSource] = {}  # PodGroup key -> where it lives
        self.evicting: set[str] = set()
        # pods whose PodScheduled condition is False: (status, reason, message) as the API
        # has it, so the pod-condition writer writes only what differs (pod_conditions.py)
        self.unschedulable: dict[str, tuple[str, str, str]] = {}
        self.gone = asyncio.Event()  # set whenever an evicted pod is seen deleted
        self._batch_depth = 0
        self._batch: contextlib.ExitStack | None = None
        self._keyed: dict[str, PodGroup] = {}  # upstream PodGroups with a topology key
        self._synthetic: set[str] = set()
        # node-label levels named by pods' Kueue annotations (pod key -> its levels), and
        # how many pods name each: levels no HyperNode tree stands for get the nodes'
        # label forest (``kueue_resolve.wanted_forest``)
        self._pod_levels: dict[str, frozenset[str]] = {}
        self._level_count: Counter[str] = Counter()
        self.informers: list[Informer[Any]] = []
        # What the cache gets for a pod and a node (dra_feed.py adds their devices, and
        # keeps pods with claims to their device nodes); as decoded by default.
        self.adjust_pod: Callable[[Pod], Pod] = lambda pod: pod
        self.adjust_node: Callable[[Node], Node] = lambda node: node
        # told of every PodGroup (None: deleted), before the cache is (dra_feed.py keeps
        # the upstream ones that share claims)
        self.seen_podgroup: Callable[[str, PodGroup | None], None] = lambda key, pg: None
        handlers: list[tuple[r.Resource, Callable[[dict[str, Any]], Any], Any]] = [
            (r.NODES, decode.node, self._node),
            (r.PODS, decode.pod, self._pod),
            (r.PRIORITY_CLASSES, decode.priority_class, self._priority_class),
            *((hn, decode.hypernode, self._hypernode(hn.group)) for hn in r.HYPERNODES),
            (r.VOLCANO_PODGROUPS, decode.volcano_podgroup, self._podgroup(r.VOLCANO_PODGROUPS)),
            (r.VOLCANO_QUEUES, decode.queue, self._queue),
            (r.WORKLOAD_PODGROUPS, decode.workload_podgroup, self._podgroup(r.WORKLOAD_PODGROUPS)),
            *storage_handlers(self),  # PVCs, PVs, StorageClasses, CSI objects, Namespaces
        ]
        for resource, decoder, handler in handlers:
            if served is None or resource in served or resource in r.BUILT_IN:
                self._add(resource, decoder, handler)

    def _add(
        self,
        resource: r.Resource,
        decoder: Callable[[dict[str, Any]], Any],
        handler: Callable[[Event[Any]], None],
    ) -> None:
        name = resource.name
        counted = self.metrics.informer_events.labels(name)  # once: labels() is a lookup

        def on_event(event: Event[Any]) -> None:
            counted.inc()
            self.apply(lambda: handler(event))

        self.informers.append(
            Informer(
                self.kube,
                resource,
                decoder,
                on_event,
                on_list=lambda start: self.apply(self._begin if start else self._end),
                name=name,
                lean=resource in LEAN,
            )
        )

    # -- changes while a session runs ------------------------------------------------

    def apply(self, change: Callable[[], None]) -> None:
        """Apply ``change`` to the cache now, a session running or not (the session reads
        its own view of the store)."""
        change()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """A session runs meanwhile: none may start while a list is being applied."""
        if self._batch_depth:
            raise RuntimeError("a session cannot run while a list is being applied")
        yield

    @property
    def listing(self) -> bool:
        """A (re)list is being applied: the index may be stale, no session may run."""
        return self._batch_depth > 0

    def _begin(self) -> None:
        if self._batch_depth == 0:
            self._batch = contextlib.ExitStack()
            # A list makes objects by the hundred thousand that live as long as the cache:
            # the cyclic collector would trace them all, again and again, as they pile up.
            self._batch.enter_context(building())
            self._batch.enter_context(self.cache.batch())
        self._batch_depth += 1

    def _end(self) -> None:
        self._batch_depth -= 1
        if self._batch_depth == 0 and self._batch is not None:
            self._batch.close()
            self._batch = None
            self._resolve_keys()
            self.on_change()

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    # -- handlers --------------------------------------------------------------------

    def _node(self, event: Event[Node]) -> None:
        if event.type is EventType.DELETED:
            self.cache.remove_node(event.key)
        else:
            assert event.obj is not None
            self.cache.upsert_node(self.adjust_node(event.obj))
            if (self._keyed or self._level_count) and not self.listing:
                self._resolve_keys()
        self.on_change()

    def _levels_of(self, key: str, levels: frozenset[str]) -> None:
        """Keep the node-label levels an object names (a pod's Kueue annotations, a
        PodGroup's slices); resolve them when the set of all levels changes."""
        old = self._pod_levels.get(key, frozenset())
        if levels == old:
            return
        before = set(self._level_count)
        self._level_count.subtract(old)
        self._level_count.update(levels)
        self._level_count = +self._level_count
        if levels:
            self._pod_levels[key] = levels
        else:
            self._pod_levels.pop(key, None)
        if set(self._level_count) != before and not self.listing:
            self._resolve_keys()

    def _pod(self, event: Event[LivePod]) -> None:
        key = event.key
        if event.type is EventType.DELETED:
            self.created.pop(key, None)
            self.unschedulable.pop(key, None)
            if key in self.evicting:
                self.evicting.discard(key)
                self.gone.set()
            self.cache.remove_pod(key)
            self._levels_of(key, frozenset())
            self.on_change()
            return
        assert event.obj is not None
        live = event.obj
        pod = self.adjust_pod(live.pod)
        if live.unschedulable is None:
            self.unschedulable.pop(key, None)
        else:
            self.unschedulable[key] = live.unschedulable
        if any(k.startswith(KUEUE_PREFIX) for k in pod.meta.annotations):
            self._levels_of(key, frozenset(level_keys([pod])))
        elif key in self._pod_levels:
            self._levels_of(key, frozenset())
        if key in self.evicting:
            return  # the session released its room; the API has not deleted it yet
        mine = pod.scheduler_name in self.scheduler_names
        pending = not pod.bound and not pod.terminated
        if pending and mine:
            self.created.setdefault(key, live.created)
        old = self.cache.pods.get(key)
        self.cache.upsert_pod(pod)
        if (
            (pending and mine and old is None)
            or (old is not None and old.holds_resources and not pod.holds_resources)
            or (pending and mine and old is not None and old.gated and not pod.gated)
        ):  # new work, freed room, or the last scheduling gate lifted: a session now
            self.on_change()

    def _hypernode(
        self, group: str
    ) -> Callable[[Event[tuple[HyperNode, tuple[Problem, ...]]]], None]:
        """The handler of one group's informer: a name is one HyperNode per group, so a
        Volcano ``rack-a`` deleted never takes tierra's ``rack-a`` with it."""

        def handle(event: Event[tuple[HyperNode, tuple[Problem, ...]]]) -> None:
            if event.type is EventType.DELETED:
                self.cache.remove_hypernode(event.key, group)
            else:
                assert event.obj is not None
                self.cache.upsert_hypernode(*event.obj)
            if (self._keyed or self._level_count) and not self.listing:
                self._resolve_keys()
            self.on_change()

        return handle

    def _podgroup(self, resource: r.Resource) -> Callable[[Event[PodGroup]], None]:
        def handle(event: Event[PodGroup]) -> None:
            self.seen_podgroup(event.key, None if event.type is EventType.DELETED else event.obj)
            if event.type is EventType.DELETED:
                self.sources.pop(event.key, None)
                self._keyed.pop(event.key, None)
                self._levels_of("PodGroup/" + event.key, frozenset())
                self.cache.remove_podgroup(event.key)
            else:
                pg = event.obj
                assert pg is not None
                self._levels_of(
                    "PodGroup/" + event.key, frozenset(annotation_levels([pg.meta.annotations]))
                )
                self.sources[event.key] = GroupSource(resource, pg.meta.uid)
                if topology_key(pg) is not None:
                    if self._keyed.get(event.key) == pg:
                        return  # our own status write came back: nothing to decide
                    self._keyed[event.key] = pg
                    if not self.listing:
                        self._resolve_keys()
                    return
                self._keyed.pop(event.key, None)
                if self.cache.podgroups.get(event.key) == pg:
                    return  # likewise
                self.cache.upsert_podgroup(pg)
            self.on_change()

        return handle

    def _queue(self, event: Event[Queue]) -> None:
        if event.type is EventType.DELETED:
            self.cache.remove_queue(event.key)
        else:
            assert event.obj is not None
            self.cache.upsert_queue(event.obj)
        self.on_change()

    def _priority_class(self, event: Event[int]) -> None:
        if event.type is EventType.DELETED:
            self.cache.remove_priority_class(event.key)
        else:
            assert event.obj is not None
            self.cache.upsert_priority_class(event.key, event.obj)
        self.on_change()

    def _resolve_keys(self) -> None:
        """Turn upstream PodGroups' label keys into tiers (see tierra.api.workload)."""
        if not self._keyed and not self._synthetic and not self._level_count:
            return
        real = [
            h
            for h in self.cache.hypernodes.values()
            if SYNTHETIC_ANNOTATION not in h.meta.annotations
        ]
        podgroups, extra = resolve_topology_keys(list(self._keyed.values()), self.cache.nodes, real)
        extra += wanted_forest(self.cache, self._level_count)  # Kueue's levels
        wanted = {h.name for h in extra}
        with self.cache.batch():
            for name in sorted(self._synthetic - wanted):
                self.cache.remove_hypernode(name, TIERRA_GROUP)  # label_domain's group
            for h in extra:
                self.cache.upsert_hypernode(h)
            for pg in podgroups:
                self.cache.upsert_podgroup(pg)
        self._synthetic = wanted
        self.on_change()

    # -- what the binder needs -------------------------------------------------------

    def evicted(self, key: str) -> None:
        """``key`` is being evicted: ignore its updates until the API deletes it."""
        self.evicting.add(key)

    async def wait_evicted(self, keys: set[str], timeout: float) -> bool:
        """Wait until the API has deleted every pod in ``keys``; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while keys & self.evicting:
            self.gone.clear()
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.gone.wait(), left)
        return True
