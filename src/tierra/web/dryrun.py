"""The scheduler cache behind the dashboard's dry runs, kept and fed like a scheduler's.

Why a pending gang waits is what a scheduling session would decide now. Building a
``ClusterStore`` from a snapshot for every dry run took 10 s at 100,000 nodes, so the dashboard
keeps one, as the Kubernetes scheduler does: built once from a snapshot of the store
and then fed every change the store takes, through the cache's own ``upsert_*`` /
``remove_*`` calls. Each dry run (and each explain) is a session inside
``ClusterStore.trial()``: it decides as a real session would and leaves the cache as it was.
A ``Memory`` kept beside it reuses each gang as built while nothing of it changes; it
does not skip gangs whose failure must repeat (a scheduler does): the page shows the
reason a session gives now, counts included, not the one an earlier session gave.

The event loop only *notes* changes (``note``: a list append under a lock) and never
touches the cache; a dry run, in a worker thread, takes the cache's lock, applies what
was noted since the last one inside one ``batch()`` (one index rebuild however many
nodes arrived), and runs. So the page keeps answering while a session runs, and a
dry run's result is exactly of the version it says. Changes noted while nobody asks
are bounded: past the store's size a fresh snapshot to build from replaces them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.api.snapshot import Snapshot
from tierra.errors import Problem, Severity
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, explain_gang, run_session
from tierra.web.devices import DeviceRoom
from tierra.web.gangs import Analysis, explanation_doc
from tierra.web.store import Change, Kind, Store, key_of

SEED_AFTER = 10_000  # changes beyond the store's object count: build afresh instead


def in_key_order(hypernodes: dict[str, HyperNode]) -> list[HyperNode]:
    """The store's HyperNodes (keyed ``group/name``), every one: a name both groups hold
    is two HyperNodes, or one and its mirror, as the topology index (and so the
    picture) tells them apart."""
    return [hypernodes[key] for key in sorted(hypernodes)]


class DryRuns:
    """One long-lived cache, the changes noted for it, and the sessions run on it."""

    def __init__(
        self, store: Store, config: SchedulerConfig, devices: DeviceRoom | None = None
    ) -> None:
        self.config = config
        self.devices = devices or DeviceRoom()  # DRA: the cache's devices and their room
        self._store = store  # read in the event loop only (``note``)
        self._cache: ClusterStore | None = None
        self._memory = Memory(skip_unchanged=False)
        self._hypernodes: dict[str, HyperNode] = {}  # as the store keys them
        self._notes = threading.Lock()  # guards the four below
        self._seed: Snapshot | None = store.snapshot()  # a cache is built from it next
        self._noted: list[Change] = []  # ... then these applied
        self._version = 0  # the dashboard version the noted changes bring it to
        self._problems: tuple[Problem, ...] = store.problems
        self._running = threading.Lock()  # one session (or feed) on the cache at a time

    def note(self, changes: Sequence[Change], version: int, *, hypernodes: bool) -> None:
        """The store took ``changes``, bringing the dashboard to ``version`` (event loop);
        ``hypernodes``: one of them is a HyperNode, whose problems the index reads too.

        Changes pile up until the next dry run (nobody may look at the gangs for days);
        past as many as the store holds objects, building a cache afresh is cheaper than
        catching up, so the pile is replaced by a snapshot to build from."""
        store = self._store
        with self._notes:
            self._noted.extend(changes)
            self._version = version
            if hypernodes:
                self._problems = store.problems
            if len(self._noted) > SEED_AFTER + len(store.nodes) + len(store.pods):
                self._seed, self._noted = store.snapshot(), []
                self._problems = store.problems

    def analyse(self) -> tuple[int, Analysis]:
        """A session's decisions for the cluster as it is now, and the version they are of."""
        with self._running:
            cache, version = self._up_to_date()
            with cache.trial():
                result = run_session(cache, self.config, memory=self._memory)
                return version, Analysis.of(result, cache.pods)

    def explain(self, key: str, show: int) -> tuple[int, dict[str, Any]]:
        """``tierra explain`` for gang ``key`` now, each tier cut to the best ``show``."""
        with self._running:
            cache, version = self._up_to_date()
            with cache.trial():
                _, exp = explain_gang(cache, key, self.config, memory=self._memory)
            return version, explanation_doc(exp, show)

    # -- feeding the cache (in the worker, holding ``_running``) -------------------------

    def _up_to_date(self) -> tuple[ClusterStore, int]:
        with self._notes:  # a seed and the changes after it, taken together
            seed, self._seed = self._seed, None
            changes, self._noted = self._noted, []
            version, problems = self._version, self._problems
        cache = self._cache
        if seed is not None:
            self._hypernodes = {key_of(h): h for h in seed.hypernodes}
            cache = self._build(seed, problems)
        assert cache is not None
        if (
            changes
            and self._apply(cache, changes)
            and _hypernode_errors(problems) != _hypernode_errors(cache.input_problems)
        ):
            cache = self._build(_objects(cache), problems)
        self.devices.refresh(cache)
        return cache, version

    def _build(self, snapshot: Snapshot, problems: tuple[Problem, ...]) -> ClusterStore:
        hns = tuple(in_key_order(self._hypernodes))
        room = self.devices
        snapshot = replace(
            snapshot,
            nodes=tuple(room.node(n) for n in snapshot.nodes),
            pods=tuple(room.pod(p) for p in snapshot.pods),
        )
        self._cache = ClusterStore.from_snapshot(
            replace(snapshot, hypernodes=hns, problems=problems)
        )
        room.attach(self._cache)
        return self._cache

    def _apply(self, cache: ClusterStore, changes: list[Change]) -> bool:
        """Feed ``changes`` to ``cache``; True when HyperNodes moved."""
        hypernodes_moved = False
        with cache.batch():
            for c in changes:
                new = c.new
                if c.kind is Kind.HYPERNODE:
                    if new is None:
                        self._hypernodes.pop(c.key, None)
                    else:
                        self._hypernodes[c.key] = cast(HyperNode, new)
                    hypernodes_moved = True
                elif c.kind is Kind.NODE:
                    if new is None:
                        cache.remove_node(c.key)
                    else:
                        cache.upsert_node(self.devices.node(cast(Node, new)))
                elif c.kind is Kind.POD:
                    if new is None:
                        cache.remove_pod(c.key)
                    else:
                        cache.upsert_pod(self.devices.pod(cast(Pod, new)))
                elif c.kind is Kind.PODGROUP:
                    if new is None:
                        cache.remove_podgroup(c.key)
                    else:
                        cache.upsert_podgroup(cast(PodGroup, new))
                elif new is None:
                    cache.remove_queue(c.key)
                else:
                    cache.upsert_queue(cast(Queue, new))
            if hypernodes_moved:
                cache.set_hypernodes(in_key_order(self._hypernodes))
        return hypernodes_moved


def _hypernode_errors(problems: Sequence[Problem]) -> list[Problem]:
    """The problems the topology index reads: errors in HyperNodes make trees unusable."""
    return [p for p in problems if p.severity is Severity.ERROR and p.obj.startswith("HyperNode/")]


def _objects(cache: ClusterStore) -> Snapshot:
    """What ``cache`` holds, as a snapshot to build a fresh one from (when the problems
    its index was built with changed, which no ``upsert`` can say)."""
    return Snapshot(
        nodes=tuple(cache.nodes),
        pods=tuple(cache.pods.values()),
        podgroups=tuple(cache.podgroups.values()),
        queues=tuple(cache.queues.values()),
    )
