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
then this says nothing: decisions as before). Loads are recomputed when the store moves
(a memo beside it, keyed like the exclusive domains').
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle
from tierra.topology.arrays import FloatArray

if TYPE_CHECKING:
    from tierra.scheduler.scoring.links import LinkTable
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import IntArray

GPU = "nvidia.com/gpu"
MAX_SCORE = 100.0  # the policies' scale (kube-scheduler's MaxNodeScore): weight 1 is one policy


@dataclass(slots=True)
class _Loads:
    at: tuple[int, int, int, object] = (-1, -1, -1, None)
    share: FloatArray = field(default_factory=lambda: np.zeros(0))  # per domain: load / cap


_MEMOS: weakref.WeakKeyDictionary[ClusterStore, _Loads] = weakref.WeakKeyDictionary()


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
    """Per domain ``x``, running gangs' GPUs through its uplink over its capacity."""
    memo = _MEMOS.get(store)
    if memo is None:
        memo = _MEMOS[store] = _Loads()
    at = (store.clock, len(store.assumed), len(store.node_of), links)
    if memo.at == at:
        return memo.share
    ix, cap = store.index, store.capacity
    col = cap.axis.index.get(GPU)
    n_dom = ix.root + 1
    load = np.zeros(n_dom, dtype=np.float64)
    if col is not None:
        for members in store.members.values():
            placed = [
                (store.node_of[k], store.pods[k].requests.get(GPU, 0) / 1000)
                for k in members
                if k in store.node_of and k in store.pods
            ]
            if len(placed) < 2:
                continue
            chains = [set(ix.domains_of(n).tolist()) for n, _ in placed]
            common = set.intersection(*chains)
            for (_, gpus), chain in zip(placed, chains, strict=True):
                for x in chain - common:  # domains it is inside and the gang spans beyond
                    load[x] += gpus
        over = _oversubscription(store, links)
        parent = np.where(ix.parent[: ix.root] >= 0, ix.parent[: ix.root], ix.root)
        gpus_under = cap.dom_alloc[: ix.root, col] / 1000
        capacity = gpus_under / over[parent]
        shares = np.zeros(n_dom, dtype=np.float64)
        blocking = over[parent] > 1.0
        shares[: ix.root] = np.where(
            blocking & (capacity > 0), load[: ix.root] / np.maximum(capacity, 1e-9), 0.0
        )
        memo.share = shares
    else:
        memo.share = np.zeros(n_dom, dtype=np.float64)
    memo.at = at
    return memo.share


@dataclass(frozen=True, slots=True)
class Contention(Constraint):
    """A score share against loaded uplinks inside a domain (module docstring)."""

    name = "contention"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # domain scores only: the flat path asks none

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
