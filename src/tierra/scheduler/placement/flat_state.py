"""The flat path's per-node fit counts and scores, kept from gang to gang in one session.

A pod without a topology constraint goes to the best-scoring node of its region
(``NodeChoice.pack_flat``, Volcano's flat path). Scoring every node again for every such
pod is what made 10,000 lone pods on 5,000 nodes take 30 s: one pod changes the ledger
on one node and the domains above it, nothing else. So a session keeps, per region,
request, eligible nodes and scoring view, each node's fit count and score, and before
each use brings them up to date from the transaction's log (``Transaction.touched``):

* a node placed on or released gets its fit count and score again;
* so does every node of a domain above it, except domains holding the whole region
  (``Policy.node_scores``: a node's score reads only its own row and its domains' rows,
  and a domain holding the whole region changes every node alike).

That is exactly what scoring from scratch would give, so the placements do not change
(``tests/scheduler/test_sched_flat_state.py`` compares with a pod-by-pod reference).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tierra.scheduler.placement.demand import Shape
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.state.transaction import Transaction
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

Scorer = Callable[[IntArray, IntArray, int], FloatArray]  # (request, nodes, region)
KEPT = 64  # states per session (a region and shape each); the least recently used goes


@dataclass(slots=True)
class FlatState:
    """One region's nodes for one shape: fit counts and scores (-inf: cannot take it)."""

    nodes: IntArray  # the region's nodes
    pos: IntArray  # per node of the cluster, its position in ``nodes`` (-1: outside)
    group: IntArray  # per position, the node's group (``Layouts.group_of``)
    counts: IntArray
    live: FloatArray
    seen: int  # entries of ``Transaction.touched`` already reflected
    by_group: dict[int, IntArray]  # ``FlatStates._group_nodes``, memoised
    anchors: tuple[object, ...]  # the objects whose ids make the key, kept alive


class FlatStates:
    """Every flat state of one session, keyed by region, request, eligibility and view."""

    def __init__(self, cache: ClusterStore, txn: Transaction, score: Scorer) -> None:
        self.cache = cache
        self.txn = txn
        self.score = score
        self._states: OrderedDict[tuple[object, ...], FlatState] = OrderedDict()

    def get(self, shape: Shape, region: int, view: object) -> FlatState:
        """The state for ``shape`` inside ``region``, as scoring from scratch would give."""
        mask = shape.eligibility.mask
        key = (region, shape.vec.tobytes(), id(mask), id(view))
        state = self._states.get(key)
        if state is None:
            state = self._build(shape, region, (mask, view))
            self._states[key] = state
            if len(self._states) > KEPT:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(key)
            self.refresh(state, shape, region)
        return state

    def _build(self, shape: Shape, region: int, anchors: tuple[object, ...]) -> FlatState:
        cache = self.cache
        ix = cache.index
        root = region == ix.root
        nodes = np.arange(len(ix.node_names), dtype=np.int64) if root else ix.real_nodes[region]
        pos = np.full(len(ix.node_names), -1, dtype=np.int64)
        pos[nodes] = np.arange(len(nodes), dtype=np.int64)
        counts = cache.capacity.fit_counts(
            shape.vec, shape.eligibility.mask, None if root else nodes
        )
        live = np.where(counts > 0, self.score(shape.vec, nodes, region), -np.inf)
        group = cache.layouts.group_of[nodes]
        return FlatState(nodes, pos, group, counts, live, len(self.txn.touched), {}, anchors)

    def refresh(self, state: FlatState, shape: Shape, region: int) -> None:
        """Bring ``state`` up to date with the changes logged since it last was."""
        log = self.txn.touched
        if state.seen == len(log):
            return
        since = log[state.seen :]
        # one pod placed since (the lone pods' case): its node, without sorting
        touched = (
            since[0] if len(since) == 1 and len(since[0]) == 1 else np.unique(np.concatenate(since))
        )
        state.seen = len(log)
        at = state.pos[touched]
        at = at[at >= 0]
        if len(at):
            state.counts[at] = self.cache.capacity.fit_counts(
                shape.vec, shape.eligibility.mask, state.nodes[at]
            )
        at = self._affected(state, touched, region)
        if len(at) == 0:
            return
        if 2 * len(at) > len(state.nodes):  # most of them: one call over all is cheaper
            at = np.arange(len(state.nodes), dtype=np.int64)
        fresh = self.score(shape.vec, state.nodes[at], region)
        state.live[at] = np.where(state.counts[at] > 0, fresh, -np.inf)

    def _affected(self, state: FlatState, touched: IntArray, region: int) -> IntArray:
        """Positions of the region's nodes whose score may have changed."""
        groups = self.cache.layouts.group_of[touched]
        if len(touched) == 1:
            found = self._group_nodes(state, int(touched[0]), int(groups[0]), region)
            at = state.pos[touched]
            return found if at[0] < 0 or len(found) else at[at >= 0]
        _, first = np.unique(groups, return_index=True)
        parts = [
            self._group_nodes(state, int(touched[i]), int(groups[i]), region)
            for i in first.tolist()
        ]
        at = state.pos[touched]
        return np.unique(np.concatenate([at[at >= 0], *parts]))

    def _group_nodes(self, state: FlatState, node: int, group: int, region: int) -> IntArray:
        """Positions of the nodes sharing a domain, other than those holding the whole
        region, with ``node`` (so with every node of its group), memoised per group."""
        found = state.by_group.get(group)
        if found is None:
            ix, lay = self.cache.index, self.cache.layouts
            doms = ix.domains_of(node)
            doms = doms[(doms != ix.root) & ~lay.covers(doms, region)]
            tops = doms[~np.isin(ix.parent[doms], doms)]  # the rest lie inside these
            at = state.pos[
                np.concatenate(
                    [np.zeros(0, np.int64), *map(ix.real_nodes.__getitem__, tops.tolist())]
                )
            ]
            found = state.by_group[group] = np.unique(at[at >= 0])
        return found
