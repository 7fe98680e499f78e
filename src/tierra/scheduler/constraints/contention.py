"""Contention: the load running gangs already put on shared oversubscribed uplinks.

The link costs (``scoring/links.py``) charge a gang the bandwidth of the slowest tier it
spans as if it had the fabric to itself. The simulator's contention model
(``sim/contention.py``) says why that is not so on an oversubscribed tier: every gang
with pods inside a domain ``x`` and pods outside it pushes its traffic through ``x``'s
uplink, which carries ``GPUs under x / oversubscription(parent)`` GPUs at line rate.
This constraint reads the same model off the store: per uplink, the GPUs that running
gangs crossing it have inside ``x`` (their own load; the scheduler does not know their
communication share, so each counts whole), as a fraction of its capacity.

A candidate domain's score loses ``weight`` x 100 (the policies' scale) times the mean
load fraction (capped at 1)
of the uplinks of its children that still have free room -- the uplinks a gang spanning
them would share -- so of two domains that cost the same, the one whose uplinks are free
wins, and two bandwidth-hungry gangs are not stacked under one uplink when another is
free. Opt-in: ``contention: {weight: 1}`` in the scheduler config (default 0, off, and
then this says nothing: decisions as before). The loads are kept beside the store
(``UplinkLoads``, a store extension told of every pod change), gang by gang, so a session
pays for the gangs it places, not for every gang running.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.scheduler.scoring.links import LinkTable
    from tierra.scheduler.state.store import ClusterStore

GPU = "nvidia.com/gpu"
MAX_SCORE = 100.0  # the policies' scale (kube-scheduler's MaxNodeScore): weight 1 is one policy


NAME = "contention"  # the store extension holding the loads


def _gang_load(store: ClusterStore, keys: Iterable[str], col: int) -> tuple[IntArray, FloatArray]:
    """One gang's load: per domain that holds some of its placed pods but not all (the
    uplinks its traffic crosses), the GPUs of its pods inside; empty below two pods."""
    ix = store.index
    nodes: list[int] = []
    gpus: list[float] = []
    node_of, vec_of = store.node_of, store.vec_of
    for k in keys:
        n = node_of.get(k)
        if n is not None and k in vec_of:
            nodes.append(n)
            gpus.append(float(vec_of[k][col]) / 1000)
    if len(nodes) < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    at = np.asarray(nodes, dtype=np.int64)
    starts, ends = ix.domain_ptr[at], ix.domain_ptr[at + 1]
    lens = ends - starts
    first = np.repeat(np.cumsum(lens) - lens, lens)
    doms = ix.domain_idx[
        np.arange(int(lens.sum()), dtype=np.int64) - first + np.repeat(starts, lens)
    ]
    weight = np.repeat(np.asarray(gpus, dtype=np.float64), lens)
    n_dom = ix.root + 1
    held = np.bincount(doms, minlength=n_dom)
    load: FloatArray = np.bincount(doms, weights=weight, minlength=n_dom).astype(np.float64)
    crossed: IntArray = np.flatnonzero((held > 0) & (held < len(nodes))).astype(np.int64)
    return crossed, load[crossed]


class UplinkLoads:
    """Running gangs' GPUs through every domain's uplink, kept as pods change.

    Lives in ``store.extensions["contention"]`` from the first time contention is asked;
    the store tells it which pods changed (``pods_changed``: fed, removed, assumed, a
    session's commits, a trial's undo) and it redoes only those pods' gangs, so a session
    placing many gangs among many running ones costs per gang placed, not per gang
    running. A new index (nodes or HyperNodes changed) renumbers the domains: then it
    counts every gang again."""

    def __init__(self) -> None:
        self.generation = -1
        self.load = np.zeros(0, dtype=np.float64)  # per domain (root last)
        self.by_gang: dict[str, tuple[IntArray, FloatArray]] = {}
        self.gang_of: dict[str, str] = {}  # pod key -> the gang it was counted under
        self.members: dict[str, tuple[str, ...]] = {}  # gang -> the pods counted for it
        self.version = 0  # bumped whenever ``load`` changes
        # the shares last computed: (version, index generation, link table) and them
        self.shares: tuple[tuple[int, int, object], FloatArray] | None = None
        self.over: tuple[tuple[int, object], FloatArray] | None = None  # per index and table

    def fork(self) -> UplinkLoads:
        """A session's own copy (``state/extensions.py`` ``Versioned``): the store goes on
        counting what it is fed, the session what it keeps."""
        copy = UplinkLoads()
        copy.generation, copy.version = self.generation, self.version
        copy.load = self.load.copy()
        copy.by_gang = dict(self.by_gang)
        copy.gang_of = dict(self.gang_of)
        copy.members = dict(self.members)
        copy.over = self.over
        return copy

    def replay(self, fork: UplinkLoads, pods: Sequence[Pod]) -> None:
        """Nothing to carry over: the store tells this copy of the replayed pods itself
        (``pods_changed``), and it counts their gangs from the store's tables."""

    def sync(self, store: ClusterStore) -> None:
        """Count every gang afresh when the index is not the one counted on."""
        if self.generation == store.generation:
            return
        self.generation = store.generation
        self.load = np.zeros(store.index.root + 1, dtype=np.float64)
        self.by_gang.clear()
        self.gang_of.clear()
        self.members.clear()
        self.version += 1
        self._redo(store, set(store.members))

    def pods_changed(self, store: ClusterStore, keys: Iterable[str]) -> None:
        if self.generation != store.generation:
            return  # counted afresh when next asked (``sync``)
        gangs: set[str] = set()
        for key in keys:
            old = self.gang_of.get(key)
            if old is not None:
                gangs.add(old)
            g = store.gang_of.get(key)
            if g is not None:
                gangs.add(g)
        if gangs:
            self._redo(store, gangs)

    def _redo(self, store: ClusterStore, gangs: set[str]) -> None:
        col = store.capacity.axis.index.get(GPU)
        for g in sorted(gangs):
            old = self.by_gang.pop(g, None)
            if old is not None:
                np.subtract.at(self.load, old[0], old[1])
                self.version += 1
            members = store.members.get(g, {})
            for k in self.members.pop(g, ()):
                if k not in members and self.gang_of.get(k) == g:
                    del self.gang_of[k]
            if members:
                self.members[g] = tuple(members)
                for k in members:
                    self.gang_of[k] = g
            if col is None or len(members) < 2:
                continue
            doms, gpus = _gang_load(store, members, col)
            if len(doms):
                np.add.at(self.load, doms, gpus)
                self.by_gang[g] = (doms, gpus)
                self.version += 1


def loads_of(store: ClusterStore) -> UplinkLoads:
    """The store's ``UplinkLoads``, made (and every gang counted) the first time."""
    loads = store.extensions.get(NAME)
    if not isinstance(loads, UplinkLoads):
        loads = UplinkLoads()
        store.extensions[NAME] = loads
    loads.sync(store)
    return loads


def _oversubscription(store: ClusterStore, links: LinkTable) -> FloatArray:
    """Per domain, the downlink:uplink ratio above its children (1: non-blocking)."""
    ix = store.index
    rates = dict(links)
    out = np.ones(ix.root + 1, dtype=np.float64)
    for h in range(ix.root):
        hn = ix.hypernodes[h]
        if hn.link is not None and hn.link.oversubscription:
            out[h] = float(hn.link.oversubscription)
            continue
        rate = rates.get(hn.tier_name or f"tier{int(ix.tier[h])}")  # links.tier_key
        if rate is not None:
            out[h] = float(rate.oversubscription or 1.0)
    return out


def uplink_shares(store: ClusterStore, links: LinkTable) -> FloatArray:
    """Per domain ``x``, running gangs' GPUs through its uplink over its capacity (kept
    until the loads, the index or the link table change)."""
    loads = loads_of(store)
    at = (loads.version, store.generation, links)
    kept = loads.shares
    if kept is not None and kept[0] == at:
        return kept[1]
    ix, cap = store.index, store.capacity
    col = cap.axis.index.get(GPU)
    shares = np.zeros(ix.root + 1, dtype=np.float64)
    if col is not None and loads.load.any():
        if loads.over is None or loads.over[0] != (store.generation, links):
            loads.over = ((store.generation, links), _oversubscription(store, links))
        over = loads.over[1]
        parent = np.where(ix.parent[: ix.root] >= 0, ix.parent[: ix.root], ix.root)
        gpus_under = cap.dom_alloc[: ix.root, col] / 1000
        capacity = gpus_under / over[parent]
        blocking = over[parent] > 1.0
        shares[: ix.root] = np.where(
            blocking & (capacity > 0), loads.load[: ix.root] / np.maximum(capacity, 1e-9), 0.0
        )
    loads.shares = (at, shares)
    return shares


@dataclass(frozen=True, slots=True)
class Contention(Constraint):
    """A score share against loaded uplinks inside a domain (module docstring)."""

    name = "contention"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # domain scores only: the flat path asks none

    def applies(self, cycle: Cycle) -> bool:
        return cycle.config.contention > 0

    def domain_scores(
        self, cycle: Cycle, request: IntArray, domains: IntArray, sticky: int | None
    ) -> FloatArray | None:
        weight = cycle.config.contention
        if weight <= 0 or len(domains) == 0:
            return None
        store = cycle.store
        shares = uplink_shares(store, cycle.config.links)
        if not shares.any():
            return None
        ix, cap = store.index, store.capacity
        free = (cap.dom_alloc - cap.dom_used).sum(axis=1) > 0
        out = np.zeros(len(domains), dtype=np.float64)
        for i, h in enumerate(domains.tolist()):  # candidates of one tier: few
            kids = [c for c in ix.children[h] if free[c]]
            if kids:
                out[i] = -weight * MAX_SCORE * float(np.minimum(shares[kids], 1.0).mean())
        return out
