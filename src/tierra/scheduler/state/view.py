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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import IntArray

P = ParamSpec("P")
R = TypeVar("R")

# tables a session may change (commit) or read while the store is fed: copied on a fork
_DICTS = (
    "pods",
    "podgroups",
    "queues",
    "priority_classes",
    "hypernodes",
    "hypernode_problems",
    "node_of",
    "vec_of",
    "pending",
    "gang_of",
    "gang_used",
    "solo_used",
    "queue_used",
    "gang_changed_at",
    "_shape_of",
    "_links",
    "extensions",
)
_COUNTERS = ("queue_running", "_holders", "priorities", "shape_gpus")


@dataclass(slots=True)
class Viewing:
    """The store's side of an open view: the view, whether (and when) it forked, and what
    the store was fed since (to stamp again when the view closes)."""

    view: ClusterStore
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


def fed(
    method: Callable[Concatenate[ClusterStore, P], R],
) -> Callable[Concatenate[ClusterStore, P], R]:
    """A change fed to the store, under the lock: while a view is open, forked first.

    Always under the lock (uncontended when no session runs), because a session's thread
    may open its view at any moment: a view copied from a store half-way through a change
    (a node fed: the index rebuilt, then the ledgers, the pods renumbered) would read node
    numbers its ledger does not have."""

    @functools.wraps(method)
    def wrapper(store: ClusterStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with store.lock:
            viewing = store.viewing
            if viewing is not None and viewing.forked_at is None:
                fork(store, viewing)
            return method(store, *args, **kwargs)

    return wrapper


def fork(store: ClusterStore, viewing: Viewing) -> None:
    """Give ``store`` its own copies of everything the view reads or changes."""
    viewing.forked_at = len(store_commits(viewing.view))
    for name in _DICTS:
        setattr(store, name, dict(getattr(store, name)))
    for name in _COUNTERS:
        setattr(store, name, Counter(getattr(store, name)))
    store.assumed = set(store.assumed)
    store.members = {k: dict(v) for k, v in store.members.items()}
    store.dom_freed_at = store.dom_freed_at.copy()
    cap = copy.copy(store.capacity)
    cap.node_used = cap.node_used.copy()
    cap.dom_used = cap.dom_used.copy()
    store.capacity = cap
    health = copy.copy(store.health)
    health.node_flags = health.node_flags.copy()
    health.counts = health.counts.copy()
    health.unhealthy_nodes = health.unhealthy_nodes.copy()
    store.health = health
    store.filter = store.filter.forked(store.own_nodes(), health)
    store.view = replace(store.view, capacity=cap)


def store_commits(view: ClusterStore) -> list[Kept]:
    kept = view.kept
    assert kept is not None, "not a view"
    return kept


def replay(store: ClusterStore, viewing: Viewing) -> None:
    """After a fork: the view's later decisions on the store, then what was fed stamped
    after them (see the module docstring). The store's lock is held."""
    view = viewing.view
    store.clock = max(store.clock, view.clock)
    assert viewing.forked_at is not None
    names = view.index.node_names
    for kept in store_commits(view)[viewing.forked_at :]:
        for key, _, _ in kept.evicted:
            if key in store.pods:
                store.remove_pod(key)
        for pod, n, _ in kept.assigned:
            key, node = pod.key, names[n]
            if key in store.pending and node in store.index.node_ix:
                store.assume(key, node)
    store.stamp_again(viewing.gangs, viewing.nodes, freed=viewing.freed)
