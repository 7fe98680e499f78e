"""The store's event clock: what changed since a gang last failed, as counts of events.

So that a session can tell what changed since a gang last failed (kube-scheduler's
unschedulable queue, Kueue's requeue-on-event), every change fed to the store is an
event (``clock``): ``freed_at`` is the last event that may change what fits anywhere (a
node, HyperNode, queue or priority class changed, the index rebuilt); ``dom_freed_at``
is, per domain (the root included), the last event that freed room under it (room freed
on a node can only help the domains holding that node); ``gang_changed_at`` is the last
event touching a gang (its PodGroup, a pod added, bound or removed).

While a session's view is open (``view.py``) each event fed is also noted on the
store's ``Viewing``, so that what was fed during the session is counted again after its
decisions when it closes (``stamp_again``); the session's own decisions replayed on the
store are not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.state.view import Viewing
    from tierra.topology.index import TopologyIndex


class EventClock:
    """The clock part of ``ClusterStore`` (see the module docstring)."""

    clock: int  # events so far
    freed_at: int
    dom_freed_at: IntArray
    gang_changed_at: dict[str, int]
    token: object  # identifies this store to a ``Memory``

    if TYPE_CHECKING:  # held by the other parts of the store
        index: TopologyIndex
        viewing: Viewing | None

    def _init_clock(self) -> None:
        self.token = object()
        self.clock = 0
        self.freed_at = 0
        self.dom_freed_at = np.zeros(0, dtype=np.int64)
        self.gang_changed_at = {}

    def _clock_rebuilt(self, domains: int) -> None:
        """The index was rebuilt: anything may fit now; per-domain stamps start over."""
        self._freed()
        self.dom_freed_at = np.zeros(domains, dtype=np.int64)

    def _freed(self) -> None:
        """Something happened that could let any waiting gang fit."""
        self.clock += 1
        self.freed_at = self.clock
        viewing = self.viewing
        if viewing is not None and not viewing.replaying:
            viewing.freed = True

    def _freed_on(self, node: int) -> None:
        """A pod holding resources on ``node`` left it."""
        self.clock += 1
        self.dom_freed_at[self.index.domains_of(node)] = self.clock
        viewing = self.viewing
        if viewing is not None and not viewing.replaying:
            viewing.nodes.add(self.index.node_names[node])

    def _touched(self, gang: str) -> None:
        """Something happened to gang ``gang`` (its PodGroup or its pods)."""
        self.clock += 1
        self.gang_changed_at[gang] = self.clock
        viewing = self.viewing
        if viewing is not None and not viewing.replaying:
            viewing.gangs.add(gang)

    def unchanged_since(self, gang: str, at: int) -> bool:
        """Whether nothing but consumed or freed room has changed for ``gang`` since ``at``."""
        return self.freed_at <= at and self.gang_changed_at.get(gang, 0) <= at

    def stamp_again(self, gangs: set[str], nodes: set[str], *, freed: bool) -> None:
        """Changes fed during a forked view, counted again after the view's decisions."""
        for g in sorted(gangs):
            self._touched(g)
        for name in sorted(nodes):
            n = self.index.node_ix.get(name)
            if n is not None:
                self._freed_on(n)
        if freed:
            self._freed()

    def _fork_clock(self) -> None:
        """Own copies of the tables a view shares (``view.fork``)."""
        self.gang_changed_at = dict(self.gang_changed_at)
        self.dom_freed_at = self.dom_freed_at.copy()
