"""Which waiting gangs a session may skip, and what it remembers of them, in a ``Memory``.

A gang whose last failure must repeat (``Status.must_repeat``) is skipped with that
status while nothing it depends on has changed (``ClusterStore.unchanged_since``: no
node, HyperNode, queue or priority class changed, nothing of its own changed) and no
room was freed where it could help: a freed pod re-tries a gang only when a domain
above the freed node is allowed to it and now has the room (``room_freed``; counts only
shrink as room is taken). A gang that could preempt or reclaim now is never skipped
(victims change with every binding). The preemption delay counts from when a gang was
first seen waiting (``track_waiting``).
"""

from __future__ import annotations

from collections.abc import Callable, Set

import numpy as np

from tierra.scheduler.state.memory import Failure, Memory
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.status import Status


class Requeue:
    """The skip test and the failures kept, for one session over ``store``."""

    def __init__(self, store: ClusterStore, memory: Memory, now: float | None) -> None:
        self.store = store
        self.memory = memory
        self.now = now

    def start(self, waiting: Set[str]) -> None:
        """A session starts with ``waiting`` gangs: forget the others, note new ones."""
        failures = self.memory.failures
        for key in [k for k in failures if k not in waiting]:
            del failures[key]
        since = self.memory.waiting_since
        for key in [k for k in since if k not in waiting]:
            del since[key]
        if self.now is not None:
            for key in waiting:
                since.setdefault(key, self.now)

    def earlier(self, gang: str, may_evict: Callable[[], bool]) -> Status | None:
        """The earlier status ``gang`` is skipped with, or None when it must be tried
        (``may_evict`` is asked only when everything else says skip)."""
        failed = self.memory.failures.get(gang)
        if failed is None or not self.memory.skip_unchanged:
            return None
        if not self.store.unchanged_since(gang, failed.at):
            return None
        if may_evict():
            return None
        if failed.status.searched is not None and self.room_freed(failed):
            return None
        return failed.status

    def room_freed(self, failed: Failure) -> bool:
        """Whether room freed since ``failed`` could let a domain it searched pass its counts."""
        store, searched = self.store, failed.status.searched
        assert searched is not None
        ix, lay, cap = store.index, store.layouts, store.capacity
        freed = store.dom_freed_at > failed.at  # domains holding a node freed since
        limit, region = searched.limit, searched.region
        if limit.flat:  # counted node by node over the region only
            if not freed[region]:
                return False
            inside = ix.real_nodes[region] if region != ix.root else slice(None)
            free = np.maximum(cap.node_alloc[inside] - cap.node_used[inside], 0).sum(axis=0)
            return bool((free >= searched.needs_array()).all())
        doms = np.flatnonzero(freed)
        if len(doms) == 0:
            return False
        ok = limit.allowed(ix, doms)
        ok &= (lay.tin[region] <= lay.tin[doms]) & (lay.tin[doms] < lay.tout[region])
        ok_doms = doms[ok]
        if len(ok_doms) == 0:
            return False
        free = cap.dom_alloc[ok_doms] - cap.dom_used[ok_doms]
        fits = (free[:, None, :] >= searched.needs_array()[None, :, :]).all(axis=(1, 2))
        return bool(fits.any())

    def remember(self, gang: str, status: Status) -> None:
        """Keep a failure that must repeat until something changes; forget any other."""
        if status.must_repeat:
            self.memory.failures[gang] = Failure(status, self.store.clock)
        else:
            self.memory.failures.pop(gang, None)
