"""A session's view of the store: taken once, fed nothing while the session runs.

``ClusterStore.open_view()`` hands a session its view: a second ``ClusterStore`` object
over the store's tables, ledgers and extensions as they are when the session starts.
Nothing is copied to take it, so a session nobody feeds costs what it did before views.
The session reads the view and writes only its own decisions in it: the gang being
tried is its overlay (``transaction.py``: tentative placements on one LIFO undo log,
rolled back unless kept; a trial's undo is the same log), and each gang it keeps is
committed to the view (bindings assumed, evictions removed) and is the store's at once.
A view is read-only to adapters: feeding it raises.

The store stays the adapters' to feed, while a session runs too. The first change fed
to the store while a view is open forks the store (``_fork``), once, between two gangs
of the session (the session holds the store's lock while it places one gang; a feed
waits at most that long): each part of the store takes its own copy of the tables it
holds (``_fork_<part>``), so from then on a feed changes only the store's copies and
the view keeps what the session started from; a ``Versioned`` extension, which the
adapter holds and changes in place, stays the store's, and the view is handed a fork of
it (``extensions.py``). Adapter code that changes an extension does it inside
``store.feeding()``, which forks first, as every ``upsert_*``/``remove_*`` does (``fed``).

After a fork, every gang the session keeps is replayed on the store as it is kept
(``_replay``), under the store's lock: its evictions removed, its bindings assumed where
the pod is still pending and the node still there, and what it reserved in the view's
extensions kept in the store's (``Versioned.replay``) -- so the store always holds every
decision made, as it does when nothing forks, and the adapter's binder finds there what
it binds. A replay that finds the store inside a ``batch()`` with a stale index waits
for the batch's end. When the session ends (``close_view``):

* not forked: the store and the view share everything; the event clock is taken back
  from the view;
* forked: everything the store was fed during the session is stamped again on the event
  clock after the session's decisions, so a failure the session remembered is re-checked
  when something it may depend on changed meanwhile.

The Kubernetes adapter feeds the store from its event loop while the session runs in a
worker thread; ``tests/scheduler/test_sched_view.py`` feeds it between two gangs of one
session (pods with anti-affinity, a ResourceSlice and a claim, a node) and checks both
the later gang's decision and the store after the replay.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Self, TypeVar

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.topology.index import IntArray, TopologyIndex

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(slots=True)
class Viewing:
    """The store's side of an open view: the view, whether it forked, and what the store
    was fed since (to stamp again when the view closes)."""

    view: Viewed
    forked: bool = False
    gangs: set[str] = field(default_factory=set)  # gangs (or lone pods) fed since
    nodes: set[str] = field(default_factory=set)  # nodes a pod fed since left
    freed: bool = False  # anything fed that may let any gang fit
    replaying: bool = False  # the view's decisions being replayed: not fed, not noted


@dataclass(frozen=True, slots=True)
class Kept:
    """One gang a view kept after its store forked, to replay on the store:
    ``(pod, node, request)`` bound and ``(pod key, node, request)`` evicted, node numbers
    of the view's index (``names``), and the view's extensions (what it reserved)."""

    assigned: list[tuple[Pod, int, IntArray]]
    evicted: list[tuple[str, int, IntArray]]
    names: Sequence[str]
    extensions: dict[str, object]


class Feedable:
    """What ``fed`` needs of a part of the store that is fed (``Viewed`` holds it)."""

    viewing: Viewing | None  # the open view (on the store)
    source: Viewed | None  # the store viewed (on a view)
    lock: threading.RLock

    if TYPE_CHECKING:

        def feeding(self) -> AbstractContextManager[None]: ...


S = TypeVar("S", bound=Feedable)


def fed(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A change fed to the store, under the lock: while a view is open, forked first.

    Under the lock even when no view is open (uncontended then): a session's thread may
    open its view at any moment, and a view copied from a store half-way through a change
    (a node fed: the index rebuilt, then the ledgers, the pods renumbered) reads node
    numbers its ledger does not have -- live, an IndexError in preemption."""

    @functools.wraps(method)
    def wrapper(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with store.feeding():
            return method(store, *args, **kwargs)

    return wrapper


class Viewed(Feedable):
    """The view part of ``ClusterStore``: open, fork, replay, close (module docstring)."""

    _replays: list[Kept]  # kept gangs waiting for a batch to end

    if TYPE_CHECKING:  # held by the other parts of the store
        clock: int
        freed_at: int
        _healthy: tuple[int, IntArray | None]
        _stale: bool
        pods: dict[str, Pod]
        pending: dict[str, None]
        index: TopologyIndex
        extensions: dict[str, object]

        def _fork_objects(self) -> None: ...
        def _fork_usage(self) -> None: ...
        def _fork_assume(self) -> None: ...
        def _fork_clock(self) -> None: ...
        def _fork_topology(self) -> None: ...
        def _fork_extensions(self) -> dict[str, object]: ...
        def _replay_extensions(self, forks: dict[str, object], pods: Sequence[Pod]) -> None: ...
        def remove_pod(self, key: str) -> None: ...
        def assume(self, pod_key: str, node: str) -> None: ...
        def stamp_again(self, gangs: set[str], nodes: set[str], *, freed: bool) -> None: ...

    def _init_view(self) -> None:
        self.viewing = None
        self.source = None
        self.lock = threading.RLock()
        self._replays = []

    def open_view(self) -> Self:
        """What one session reads and keeps its decisions in (see the module docstring).
        One at a time."""
        with self.lock:  # never half-way through a change being fed (``feeding``)
            if self.viewing is not None:
                raise RuntimeError("ClusterStore.open_view: a session already runs on this store")
            if self.source is not None:
                raise RuntimeError("ClusterStore.open_view: this is a view; open one on its store")
            view = copy.copy(self)
            view.source = self
            self.viewing = Viewing(view)
        return view

    def close_view(self, view: Self) -> None:
        """The session on ``view`` ended (see the module docstring)."""
        with self.lock:
            viewing = self.viewing
            if viewing is None or viewing.view is not view:
                raise RuntimeError("ClusterStore.close_view: not this store's open view")
            self.viewing = None
            view.source = None
            if not viewing.forked:
                self.clock, self.freed_at, self._healthy = view.clock, view.freed_at, view._healthy
                return
            self.clock = max(self.clock, view.clock)
            self.stamp_again(viewing.gangs, viewing.nodes, freed=viewing.freed)

    def deciding(self) -> AbstractContextManager[object]:
        """Held while a session places one gang, so a fork falls between two gangs."""
        viewing = self.viewing
        if viewing is None or viewing.forked:
            return nullcontext()
        return self.lock

    @contextmanager
    def feeding(self) -> Iterator[None]:
        """Around a change fed to the store: under its lock while a view is open, the
        view forked first. The ``upsert_*``/``remove_*`` methods run inside it; adapter
        code that changes an extension in place (``extensions.py``) wraps the change in
        it."""
        if self.source is not None:
            raise RuntimeError("a session's view is read-only: feed its store")
        with self.lock:  # ``open_view`` takes it too: no view opens half-way through
            viewing = self.viewing  # the session may have closed while we waited
            if viewing is not None and not viewing.forked:
                self._fork(viewing)
            yield

    def _fork(self, viewing: Viewing) -> None:
        """Give the store its own copies of everything the open view reads or changes."""
        viewing.forked = True
        self._fork_objects()
        self._fork_usage()
        self._fork_assume()
        self._fork_clock()
        self._fork_topology()
        viewing.view.extensions = self._fork_extensions()

    def _kept(
        self,
        assigned: list[tuple[Pod, int, IntArray]],
        evicted: list[tuple[str, int, IntArray]],
        names: Sequence[str],
        extensions: dict[str, object],
    ) -> None:
        """A gang this store's open view committed after the fork (its node ``names``,
        its ``extensions``): replayed here now, or when the current batch ends (before
        the fork the tables are shared: the store holds it already)."""
        kept = Kept(list(assigned), list(evicted), names, extensions)
        with self.lock:
            self._replays.append(kept)
            if not self._stale:
                self._replay()

    def _replay(self) -> None:
        """The kept gangs waiting, on the store (the lock is held; the index is current)."""
        viewing = self.viewing
        if viewing is not None:
            viewing.replaying = True
        try:
            while self._replays:
                kept = self._replays.pop(0)
                for key, _, _ in kept.evicted:
                    if key in self.pods:
                        self.remove_pod(key)
                placed: list[Pod] = []
                for pod, n, _ in kept.assigned:
                    key, node = pod.key, kept.names[n]
                    if key in self.pending and node in self.index.node_ix:
                        self.assume(key, node)
                        placed.append(pod)
                self._replay_extensions(kept.extensions, placed)
        finally:
            if viewing is not None:
                viewing.replaying = False
