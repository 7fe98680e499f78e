"""The scheduler cache behind the dashboard's dry runs, kept and fed like a scheduler's.

Why a pending gang waits is what a scheduling session would decide now. Building a
``Cache`` from a snapshot for every dry run took 10 s at 100,000 nodes, so the dashboard
keeps one, as the Kubernetes scheduler does: built once (from the store's objects, or
empty in live mode) and then fed every change the store takes, through the cache's own
``upsert_*`` / ``remove_*`` calls. Each dry run (and each explain) is a session inside
``Cache.trial()``: it decides as a real session would and leaves the cache as it was.
A ``Memory`` kept beside it reuses each gang as built while nothing of it changes; it
does not skip gangs whose failure must repeat (a scheduler does): the page shows the
reason a session gives now, counts included, not the one an earlier session gave.

The event loop only *notes* changes (``note``: a list append under a lock) and never
touches the cache; a dry run, in a worker thread, takes the cache's lock, applies what
was noted since the last one inside one ``batch()`` (one index rebuild however many
nodes arrived), and runs. So the page keeps answering while a session runs, and a
dry run's result is exactly of the version it says.
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
from tierra.scheduler import Cache, Memory, SchedulerConfig, explain_gang, run_session
from tierra.web.gangs import Analysis, explanation_doc
from tierra.web.store import Change, Kind


def first_of_each_name(hypernodes: dict[str, HyperNode]) -> list[HyperNode]:
    """The store's HyperNodes (keyed ``group/name``) with a name both groups define kept
    once, the first by key: what the topology index (and so the picture) keeps."""
    out: dict[str, HyperNode] = {}
    for key in sorted(hypernodes):
        out.setdefault(hypernodes[key].name, hypernodes[key])
    return list(out.values())


class DryRuns:
    """One long-lived cache, the changes noted for it, and the sessions run on it."""

    def __init__(self, snapshot: Snapshot | None, config: SchedulerConfig) -> None:
        self.config = config
        self._seed = snapshot  # built into the cache on first use
        self._cache: Cache | None = None
        self._memory = Memory(skip_unchanged=False)
        self._hypernodes: dict[str, HyperNode] = {}  # as the store keys them
        self._noted: list[Change] = []
        self._version = 0  # the dashboard version the noted changes bring it to
        self._problems: tuple[Problem, ...] = snapshot.problems if snapshot else ()
        self._notes = threading.Lock()  # guards _noted and _version
        self._running = threading.Lock()  # one session (or feed) on the cache at a time
        if snapshot is not None:
            self._hypernodes = {f"{h.group}/{h.name}": h for h in snapshot.hypernodes}

    def note(
        self,
        changes: Sequence[Change],
        version: int,
        problems: tuple[Problem, ...] | None = None,
    ) -> None:
        """The store took ``changes``, bringing the dashboard to ``version`` (event loop);
        ``problems``: the store's, when a HyperNode changed (a tree with an invalid
        HyperNode is unusable to the scheduler as in the picture)."""
        with self._notes:
            self._noted.extend(changes)
            self._version = version
            if problems is not None:
                self._problems = problems

    def prepare(self) -> None:
        """Build the cache now (before serving), so the first dry run does not wait."""
        with self._running:
            self._up_to_date()

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

    def _up_to_date(self) -> tuple[Cache, int]:
        with self._notes:
            changes, self._noted = self._noted, []
            version, problems = self._version, self._problems
        cache = self._cache
        if cache is None:
            seed, self._seed = self._seed, None
            cache = self._build(seed or Snapshot(), problems)
        if (
            changes
            and self._apply(cache, changes)
            and _hypernode_errors(problems) != _hypernode_errors(cache.input_problems)
        ):
            cache = self._build(_objects(cache), problems)
        return cache, version

    def _build(self, snapshot: Snapshot, problems: tuple[Problem, ...]) -> Cache:
        hns = tuple(first_of_each_name(self._hypernodes))
        self._cache = Cache.from_snapshot(replace(snapshot, hypernodes=hns, problems=problems))
        return self._cache

    def _apply(self, cache: Cache, changes: list[Change]) -> bool:
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
                        cache.upsert_node(cast(Node, new))
                elif c.kind is Kind.POD:
                    if new is None:
                        cache.remove_pod(c.key)
                    else:
                        cache.upsert_pod(cast(Pod, new))
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
                cache.set_hypernodes(first_of_each_name(self._hypernodes))
        return hypernodes_moved


def _hypernode_errors(problems: Sequence[Problem]) -> list[Problem]:
    """The problems the topology index reads: errors in HyperNodes make trees unusable."""
    return [p for p in problems if p.severity is Severity.ERROR and p.obj.startswith("HyperNode/")]


def _objects(cache: Cache) -> Snapshot:
    """What ``cache`` holds, as a snapshot to build a fresh one from (when the problems
    its index was built with changed, which no ``upsert`` can say)."""
    return Snapshot(
        nodes=tuple(cache.nodes),
        pods=tuple(cache.pods.values()),
        podgroups=tuple(cache.podgroups.values()),
        queues=tuple(cache.queues.values()),
    )
