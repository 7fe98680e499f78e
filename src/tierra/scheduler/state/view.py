"""A session's view of the store, so that an adapter may keep feeding the store meanwhile.

``ClusterStore.open_view()`` hands a session a view: a second ``ClusterStore`` object over
the *same* tables and ledgers (nothing is copied, so a session costs what it did). The
session reads it and keeps its decisions in it (``commit``: bindings assumed, evictions
removed); its tentative placements live in its ``Transaction`` (the overlay) until then.

The store stays the adapters' to feed. The first change fed to the store while a view is
open forks the store (``fork``): the store copies its tables and ledgers, once, between
two gangs of the session (a lock the session holds while it places one gang), and from
then on changes only its copies; the view keeps the old ones, so the session sees the
store as it was when it started, read-only but for its own decisions. When the session
ends (``ClusterStore.close_view``):

* not forked: the store and the view share everything; only the event clock is taken
  back from the view;
* forked: the decisions the view kept after the fork are replayed on the store
  (evictions removed, bindings assumed where the pod is still pending and the node still
  there), and everything the store was fed during the session is stamped again after
  them on the event clock, so a failure the session remembered is re-checked when
  something it may depend on changed meanwhile.

The Kubernetes adapter feeds the store from its event loop while the session runs in a
worker thread: each feed call takes the store's lock while a view is open, so it waits
at most for the gang being placed, then forks (once) and goes on without waiting.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Self, TypeVar

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.topology.index import IntArray, TopologyIndex

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(slots=True)
class Viewing:
    """The store's side of an open view: the view, whether (and when) it forked, and what
    the store was fed since (to stamp again when the view closes)."""

    view: Viewed
    forked_at: int | None = None  # how many of the view's commits the fork holds
    gangs: set[str] = field(default_factory=set)  # gangs (or lone pods) fed since
    nodes: set[str] = field(default_factory=set)  # nodes a pod fed since left
    freed: bool = False  # anything fed that may let any gang fit


@dataclass(frozen=True, slots=True)
class Kept:
    """One commit of a view, as its transaction logged it: ``(pod, node, request)`` bound
    and ``(pod key, node, request)`` evicted, node numbers of the view's index."""

    assigned: list[tuple[Pod, int, IntArray]]
    evicted: list[tuple[str, int, IntArray]]


class Feedable:
    """What ``fed`` needs of a part of the store that is fed (``Viewed`` holds it)."""

    viewing: Viewing | None  # the open view (on the store)
    lock: threading.RLock

    if TYPE_CHECKING:

        def _fork(self) -> None: ...


S = TypeVar("S", bound=Feedable)


def fed(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A change fed to the store: while a view is open, under the lock, forked first."""

    @functools.wraps(method)
    def wrapper(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        viewing = store.viewing
        if viewing is None:
            return method(store, *args, **kwargs)
        with store.lock:
            if viewing.forked_at is None:
                store._fork()
            return method(store, *args, **kwargs)

    return wrapper


class Viewed(Feedable):
    """The view part of ``ClusterStore``: open, fork, replay, close (module docstring)."""

    kept: list[Kept] | None  # (on a view) its commits

    if TYPE_CHECKING:  # held by the other parts of the store
        clock: int
        freed_at: int
        _healthy: tuple[int, IntArray | None]
        pods: dict[str, Pod]
        pending: dict[str, None]
        index: TopologyIndex

        def _fork_objects(self) -> None: ...
        def _fork_usage(self) -> None: ...
        def _fork_assume(self) -> None: ...
        def _fork_clock(self) -> None: ...
        def _fork_topology(self) -> None: ...
        def _fork_extensions(self) -> None: ...
        def remove_pod(self, key: str) -> None: ...
        def assume(self, pod_key: str, node: str) -> None: ...
        def stamp_again(self, gangs: set[str], nodes: set[str], *, freed: bool) -> None: ...

    def _init_view(self) -> None:
        self.viewing = None
        self.lock = threading.RLock()
        self.kept = None

    def open_view(self) -> Self:
        """What one session reads and keeps its decisions in: this store's tables, until
        the store is fed while the session runs (then the store forks). One at a time."""
        if self.viewing is not None:
            raise RuntimeError("ClusterStore.open_view: a session already runs on this store")
        view = copy.copy(self)
        view.kept = []
        self.viewing = Viewing(view)
        return view

    def close_view(self, view: Self) -> None:
        """The session on ``view`` ended: its decisions are the store's (see above)."""
        viewing = self.viewing
        if viewing is None or viewing.view is not view:
            raise RuntimeError("ClusterStore.close_view: not this store's open view")
        with self.lock:
            self.viewing = None
            if viewing.forked_at is None:
                self.clock, self.freed_at, self._healthy = view.clock, view.freed_at, view._healthy
                return
            self._replay(view, viewing.forked_at)
            self.stamp_again(viewing.gangs, viewing.nodes, freed=viewing.freed)

    def deciding(self) -> AbstractContextManager[object]:
        """Held while a session places one gang, so a fork falls between two gangs."""
        viewing = self.viewing
        if viewing is None or viewing.forked_at is not None:
            return nullcontext()
        return self.lock

    def _fork(self) -> None:
        """Give the store its own copies of everything the open view reads or changes."""
        viewing = self.viewing
        assert viewing is not None and viewing.view.kept is not None, "no open view"
        viewing.forked_at = len(viewing.view.kept)
        self._fork_objects()
        self._fork_usage()
        self._fork_assume()
        self._fork_clock()
        self._fork_topology()
        self._fork_extensions()

    def _replay(self, view: Self, forked_at: int) -> None:
        """After a fork: the view's later decisions on the store (the lock is held)."""
        self.clock = max(self.clock, view.clock)
        assert view.kept is not None
        names = view.index.node_names
        for kept in view.kept[forked_at:]:
            for key, _, _ in kept.evicted:
                if key in self.pods:
                    self.remove_pod(key)
            for pod, n, _ in kept.assigned:
                key, node = pod.key, names[n]
                if key in self.pending and node in self.index.node_ix:
                    self.assume(key, node)
