"""The flat path's per-node fit counts and scores, kept from gang to gang and session to session.

A pod without a topology constraint goes to the best-scoring node of its region
(``NodeChoice.pack_flat``, Volcano's flat path). Scoring every node again for every such
pod is what made 10,000 lone pods on 5,000 nodes take 30 s: one pod changes the ledger
on one node and the domains above it, nothing else. So the ledger keeps (beside it, per
``Capacity``), per region, request, eligible nodes and scoring (the view's index, link
rates and gang-shape mix, the configured policies and node-scoring constraints), each
node's fit count and score, and before each use brings them up to date from the
ledger's log of the node rows that moved (``Capacity.move_log``: a session's placements
and undos, and what adapters fed between sessions):

* a node placed on or released gets its fit count and score again;
* so does every node of a domain above it, except domains holding the whole region
  (``Policy.node_scores``: a node's score reads only its own row and its domains' rows,
  and a domain holding the whole region changes every node alike), unless it cannot take
  a pod (its score is -inf whatever the policies say).

That is exactly what scoring from scratch would give, so the placements do not change
(``tests/scheduler/test_sched_flat_state.py`` compares with a pod-by-pod reference).
Kept across sessions, a flat gang at 100,000 nodes no longer scores every node first: the
scores read only the ledger and the scoring, both in the key or the log. A new log (it
starts again when long) or a new ``node_used`` (a forked or copied ledger) scores afresh.
"""

from __future__ import annotations

import itertools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from tierra.scheduler.placement.demand import Shape
from tierra.scheduler.state.layout import Layouts
from tierra.scheduler.state.store import ClusterStore
from tierra.topology.arrays import FloatArray
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray

Scorer = Callable[[IntArray, IntArray, int], FloatArray]  # (request, nodes, region)
KEPT = 16  # states per ledger (a region, shape and scoring each); the least recently used goes
_States = OrderedDict[tuple[object, ...], "FlatState"]
# per ledger, its states: beside it (derived data), gone with it
_KEPT: weakref.WeakKeyDictionary[Capacity, _States] = weakref.WeakKeyDictionary()
# per layout (one per index), per region: ``FlatStates._group_nodes``, which reads only
# those two; shared by every state of the region (a new gang-shape mix each session made
# new states, and each worked out again the nodes around every group it touched)
_GROUPS: weakref.WeakKeyDictionary[Layouts, dict[int, dict[int, IntArray]]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(slots=True)
class FlatState:
    """One region's nodes for one shape: fit counts and scores (-inf: cannot take it)."""

    nodes: IntArray  # the region's nodes
    pos: IntArray  # per node of the cluster, its position in ``nodes`` (-1: outside)
    group: IntArray  # per position, the node's group (``Layouts.group_of``)
    counts: IntArray
    live: FloatArray
    log: list[IntArray]  # the ledger's move log it reads (``Capacity.move_log``)
    used: IntArray  # the ledger's ``node_used`` it was counted on
    seen: int  # entries of ``log`` already reflected
    by_group: dict[int, IntArray]  # ``FlatStates._group_nodes``, memoised (``_GROUPS``)
    anchors: tuple[object, ...]  # the objects whose ids make the key, kept alive


class FlatStates:
    """The flat states of the store's ledger, keyed by region, request, eligibility and
    scoring (``scoring``: what the node scores read besides the ledger, as a key)."""

    def __init__(self, cache: ClusterStore, score: Scorer) -> None:
        self.cache = cache
        self.score = score
        self._scoring: tuple[object, tuple[int, ...]] = (None, ())  # the last one, its key

    def get(self, shape: Shape, region: int, scoring: tuple[Hashable, ...]) -> FlatState:
        """The state for ``shape`` inside ``region``, as scoring from scratch would give.

        ``scoring`` holds objects (compared by identity, kept alive) and values that
        decide the scores besides the ledger."""
        cap = self.cache.capacity
        states = _KEPT.get(cap)
        if states is None:
            states = _KEPT[cap] = OrderedDict()
        mask = shape.eligibility.mask
        seen, tail = self._scoring
        if seen is not scoring:  # numbers for it, once per scoring (hashing a mix is dear)
            tail = tuple(map(_identity, scoring))
            self._scoring = (scoring, tail)
        key = (region, shape.vec.tobytes(), id(mask), *tail)
        state = states.get(key)
        if state is None or state.log is not cap.move_log or state.used is not cap.node_used:
            state = self._build(shape, region, (mask, *scoring))
            states[key] = state
            if len(states) > KEPT:
                states.popitem(last=False)
        else:
            states.move_to_end(key)
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
        cap = cache.capacity
        log = cap.move_log
        by_group = _GROUPS.setdefault(cache.layouts, {}).setdefault(region, {})
        return FlatState(
            nodes, pos, group, counts, live, log, cap.node_used, len(log), by_group, anchors
        )

    def refresh(self, state: FlatState, shape: Shape, region: int) -> None:
        """Bring ``state`` up to date with the changes logged since it last was."""
        cap = self.cache.capacity
        if state.log is not cap.move_log or state.used is not cap.node_used:
            self._afresh(state, shape, region)  # the log started again since: all of it
            return
        log = state.log
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
        # nodes that cannot take a pod score -inf whatever their score: only the rest are
        # scored (a filling spine's full nodes are half of it on average)
        room = state.counts[at] > 0
        state.live[at[~room]] = -np.inf
        at = at[room]
        if len(at):
            state.live[at] = self.score(shape.vec, state.nodes[at], region)

    def _afresh(self, state: FlatState, shape: Shape, region: int) -> None:
        """Count and score every node of ``state`` again, reading the ledger's log from now."""
        cap = self.cache.capacity
        root = region == self.cache.index.root
        state.counts = cap.fit_counts(
            shape.vec, shape.eligibility.mask, None if root else state.nodes
        )
        fresh = self.score(shape.vec, state.nodes, region)
        state.live = np.where(state.counts > 0, fresh, -np.inf)
        state.log, state.used, state.seen = cap.move_log, cap.node_used, len(cap.move_log)

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
        parts.append(at[at >= 0])
        if sum(map(len, parts)) * 16 < len(state.nodes):
            return np.unique(np.concatenate(parts))
        # many (a large gang touches many spines): marked in place, not sorted
        marked = np.zeros(len(state.nodes), dtype=bool)
        for part in parts:
            marked[part] = True
        return np.flatnonzero(marked)

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


_VALUES: dict[Hashable, int] = {}  # a number per value seen in a scoring key
_NUMBERS = itertools.count(1)  # never reused: a forgotten value's number stays its own


def _identity(item: Hashable) -> int:
    """An object of a scoring key by identity (indexes, layouts, link rates), a value
    (tuples of frozen dataclasses: a mix, policies) by the number it was given."""
    if not isinstance(item, tuple):
        return id(item)
    found = _VALUES.get(item)
    if found is None:
        if len(_VALUES) > 4096:  # a value per mix and configuration: keep a few
            _VALUES.clear()
        found = _VALUES[item] = next(_NUMBERS)
    return found
