"""Node choice inside a domain: which nodes get a gang's pods, once its domain is chosen.

Two ways, both writing through the session's transaction:

* ``distribute`` (gangs with a topology constraint): as few sub-domains as possible,
  best fit top down -- at each level the child that holds everything with the least
  room to spare, or else the child with the most room, then recurse to nodes. Healthy
  children come before degraded ones. So a sub-group lands in the lowest common domain
  that holds it, and partly used domains are filled before empty ones are broken.
* ``pack_flat`` (gangs without one): nodes one at a time by policy score, Volcano's
  flat path, which packs pods into domains already in use (binpack's fading score).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.protocol import Cycle, Refusal
from tierra.scheduler.constraints.registry import hooks
from tierra.scheduler.placement import preferences
from tierra.scheduler.placement.asking import apply_caps, capped, caps_for, node_scores
from tierra.scheduler.placement.demand import Demand, Shape
from tierra.scheduler.placement.flat_state import FlatState, FlatStates
from tierra.scheduler.scoring.base import View
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.state.transaction import Transaction
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

Unit = tuple[int, int, int]  # (pods it holds, order, id): id < 0 is node -1 - id


def _pick(healthy: list[Unit], degraded: list[Unit], rest: int) -> Unit:
    """The tightest unit that holds the rest (healthy first), else the roomiest."""
    for units in (healthy, degraded):
        if units and units[0][0] >= rest:
            i = 0
            while i + 1 < len(units) and units[i + 1][0] >= rest:
                i += 1
            while i > 0 and units[i - 1][0] == units[i][0]:
                i -= 1
            return units.pop(i)
    return (healthy or degraded).pop(0)


def lowest_common(cache: ClusterStore, nodes: Sequence[int] | IntArray) -> int | None:
    """The lowest usable domain holding every node (the root if none), None if no nodes."""
    if len(nodes) == 0:
        return None
    ix = cache.index
    if len(nodes) == 1:  # a lone pod's: every domain holding its node
        common = ix.domains_of(int(nodes[0]))
    elif len(arr := np.unique(np.asarray(nodes, dtype=np.int64))) == 1:
        common = ix.domains_of(int(arr[0]))
    else:
        _, doms = cache.layouts.node_entries(arr)
        cnt = np.bincount(doms, minlength=ix.root + 1)
        common = np.flatnonzero(cnt == len(arr))
    common = common[(common == ix.root) | ix.usable[common]]
    order = np.lexsort((common, ix.tier[common]))
    return int(common[order[0]])


class NodeChoice:
    """Chooses nodes inside domains and places pods there through ``txn``."""

    def __init__(
        self,
        cache: ClusterStore,
        config: SchedulerConfig,
        txn: Transaction,
        view: View | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.txn = txn
        # the gang's attempt (the allocator starts one per gang); scores read its view
        self.cycle = Cycle(cache, config, txn, view or cache.view, hooks(config.constraints))
        # the node caps that kept the last shape ``place_in`` could not place short
        self.refused: list[Refusal] = []
        self._capped: list[Refusal] = []
        self.flat = FlatStates(cache, self.node_scores)
        self._node_scorers = hooks(config.constraints).node_scores  # every gang's
        self._scoring_of: tuple[object, tuple[Hashable, ...]] = (None, ())

    @property
    def view(self) -> View:
        """The session's scoring view (link rates, shape mix)."""
        return self.cycle.view

    @view.setter
    def view(self, view: View) -> None:
        self.cycle.view = view

    def counts_in(self, h: int, shape: Shape) -> IntArray:
        """Pods of ``shape`` each node of ``h`` may take now (room, then node caps)."""
        ix = self.cache.index
        full = np.zeros(len(ix.node_names), dtype=np.int64)
        if h == ix.root:
            full = self.cache.capacity.fit_counts(shape.vec, shape.eligibility.mask)
            if self.cycle.hooks.node_caps:
                nodes = np.arange(len(full), dtype=np.int64)
                self._capped = capped(self.cycle, shape, nodes, full)
            return full
        nodes = ix.real_nodes[h]
        counts = self.cache.capacity.fit_counts(shape.vec, shape.eligibility.mask, nodes)
        if self.cycle.hooks.node_caps:
            self._capped = capped(self.cycle, shape, nodes, counts)
        full[nodes] = counts
        return full

    def distribute(
        self, h: int, need: int, per_node: IntArray, prefs: FloatArray | None = None
    ) -> list[tuple[int, int]]:
        """Up to ``need`` pods over ``h``'s nodes, in as few sub-domains as possible;
        ``prefs`` (the pods' own share per node, ``preferences.py``) picks among equals."""
        out: list[tuple[int, int]] = []
        self._fill(h, need, per_node, out, prefs)
        return out

    def _units(self, h: int, per_node: IntArray) -> tuple[list[Unit], list[Unit]]:
        """``h``'s children and direct nodes with room, healthy and degraded, roomiest
        first: ``(count, order, id)``, id < 0 for a node."""
        cache = self.cache
        ix = cache.index
        healthy: list[Unit] = []
        degraded: list[Unit] = []
        kids = ix.children[h]
        bad = cache.health.degraded_domains(np.array(kids, dtype=np.int64)).tolist() if kids else []
        for c, is_bad in zip(kids, bad, strict=True):
            cnt = int(per_node[ix.real_nodes[c]].sum())
            if cnt > 0:
                (degraded if is_bad else healthy).append((cnt, c, c))
        direct = cache.layouts.loose_nodes if h == ix.root else ix.direct_nodes[h]
        if len(direct):
            dc = per_node[direct]
            some = dc > 0
            base = ix.root + 1
            healthy.extend(
                (cnt, base + n, -1 - n)
                for n, cnt in zip(direct[some].tolist(), dc[some].tolist(), strict=True)
            )
        healthy.sort(key=lambda u: (-u[0], u[1]))
        degraded.sort(key=lambda u: (-u[0], u[1]))
        return healthy, degraded

    def _fill(
        self,
        h: int,
        need: int,
        per_node: IntArray,
        out: list[tuple[int, int]],
        prefs: FloatArray | None = None,
    ) -> int:
        """Best fit, top down: the tightest unit holding the rest, else the roomiest
        (with ``prefs``: ``_pick_preferred``)."""
        if need <= 0:
            return 0
        healthy, degraded = self._units(h, per_node)
        placed = 0
        while placed < need and (healthy or degraded):
            rest = need - placed
            if prefs is not None:
                pick = self._pick_preferred(healthy, degraded, rest, per_node, prefs)
            else:
                pick = _pick(healthy, degraded, rest)
            cnt, _, uid = pick
            if uid < 0:
                n = -1 - uid
                k = min(cnt, rest, int(per_node[n]))
                if k > 0:
                    out.append((n, k))
                    per_node[n] -= k
                    placed += k
            else:
                placed += self._fill(uid, min(cnt, rest), per_node, out, prefs)
        return placed

    def _pick_preferred(
        self,
        healthy: list[Unit],
        degraded: list[Unit],
        rest: int,
        per_node: IntArray,
        prefs: FloatArray,
    ) -> Unit:
        """``_pick`` with the pods' preferences among equals: of the units holding the
        rest, the most preferred (then the tightest); else, of the roomiest, the most
        preferred. Healthy units before degraded ones, as always."""
        ix = self.cache.index
        units = healthy or degraded

        def liked(u: Unit) -> float:
            if u[2] < 0:
                return float(prefs[-1 - u[2]])
            return preferences.unit(ix.real_nodes[u[2]], per_node, prefs, min(u[0], rest))

        for group in (healthy, degraded):
            holding = [u for u in group if u[0] >= rest]
            if holding:
                pick = max(holding, key=lambda u: (liked(u), -u[0], -u[1]))
                group.remove(pick)
                return pick
        roomiest = [u for u in units if u[0] == units[0][0]]
        pick = max(roomiest, key=lambda u: (liked(u), -u[1]))
        units.remove(pick)
        return pick

    def place_in(self, h: int, demand: Demand) -> bool:
        """Place every pod of ``demand`` inside domain ``h`` (False: nothing is kept)."""
        mark = self.txn.mark()
        for shape in demand.shapes:
            self._capped = []
            per_node = self.counts_in(h, shape)
            plan = self.distribute(h, len(shape.pods), per_node, self._prefs(shape, h, per_node))
            if sum(k for _, k in plan) < len(shape.pods):
                self.refused = self._capped
                self.txn.rollback(mark)
                return False
            self.txn.place_plan(shape.pods, plan, shape.vec)
        return True

    def failure(self, h: int) -> str:
        """Why the last ``place_in`` (or ``pack_flat``) fell short: the node caps that
        kept a shape short (a rule keeping the gang's pods apart names its field), else
        only that it did."""
        words = [r.words(self.cache, h) for r in self.refused]
        return "placement failed" + (": " + "; ".join(words) if words else "")

    def _prefs(self, shape: Shape, h: int, per_node: IntArray) -> FloatArray | None:
        """The pods' own share over ``h``'s nodes (None: they prefer nothing)."""
        if not self.cycle.hooks.pod_scores:
            return None
        ix = self.cache.index
        nodes = np.arange(len(ix.node_names), dtype=np.int64) if h == ix.root else ix.real_nodes[h]
        return preferences.over(self.cycle, shape, nodes, per_node)

    def place_near(self, shape: Shape, pods: Sequence[Pod], near: int, region: int) -> int:
        """As many of ``pods`` as fit, in the lowest ancestors of ``near`` within ``region``."""
        ix = self.cache.index
        placed = 0
        for x in ix.ancestors(near):
            if placed >= len(pods):
                break
            if x != region and not self.cache.layouts.inside(x, region):
                break
            per_node = self.counts_in(x, shape)
            prefs = self._prefs(shape, x, per_node)
            plan = self.distribute(x, len(pods) - placed, per_node, prefs)
            self.txn.place_plan(pods[placed:], plan, shape.vec)
            placed += sum(k for _, k in plan)
            if x == region:
                break
        return placed

    # -- the flat path ----------------------------------------------------------------

    def node_scores(self, vec: IntArray, nodes: IntArray, region: int) -> FloatArray:
        """Every scoring constraint's share of each node's score (``asking.node_scores``)."""
        return node_scores(self.cycle, vec, nodes, region)

    def _scoring(self) -> tuple[Hashable, ...]:
        """What the flat path's node scores read besides the ledger: the view's index,
        layouts and link rates (by identity), its gang-shape mix, the policies and the
        node-scoring constraints (by value) -- equal from session to session while the
        cluster's shape mix stands, so kept scores serve the next session too."""
        v = self.view
        if self._scoring_of[0] is not v:
            found = (v.index, v.layouts, v.links, v.mix, self.config.policies, self._node_scorers)
            self._scoring_of = (v, found)
        return self._scoring_of[1]

    def _limits(self, state: FlatState, shape: Shape) -> tuple[IntArray, FloatArray]:
        """The flat state's counts and scores under the node caps (the state's own arrays
        when no constraint caps nodes: the state is kept between gangs, caps are not)."""
        given = caps_for(self.cycle, shape, state.nodes) if self.cycle.hooks.node_caps else []
        if not given:  # no constraint caps this shape: the kept arrays as they are
            self._capped = []
            return state.counts, state.live
        counts = state.counts.copy()
        self._capped = apply_caps(self.cycle, given, counts)
        return counts, np.where(counts > 0, state.live, -np.inf)

    def _preferred(
        self, shape: Shape, nodes: IntArray, counts: IntArray, live: FloatArray
    ) -> tuple[IntArray, FloatArray, bool]:
        """The flat path's counts and scores with the pods' own share added (a new
        array: the kept state is not touched), and whether there was one."""
        if not self.cycle.hooks.pod_scores:
            return counts, live, False
        share = preferences.pod_scores(self.cycle, shape, nodes, counts > 0)
        if share is None:
            return counts, live, False
        return counts, live + share, True

    def pack_flat(self, shape: Shape, pods: Sequence[Pod], region: int, partial: bool) -> int:
        """Choose nodes by policy score (Volcano's flat path), packing into used domains.

        Exact greedy, pod by pod, without rescoring every node after every pod: nodes
        held by the same domains form a group (a leaf's nodes). Placing a pod in group G
        raises every G node's score at least as much as any other node's (packing
        policies grow with domain fill), so while G's next node scored at least as well
        as the best node outside G before, it still does: fill G in score order, then
        rescore only the nodes whose domains changed. Spreading policies (which do not
        pack) rescore after every pod. The counts and scores are kept for the session's
        next gangs (``flat_state.py``), so a lone pod rescores only what changed.
        """
        state = self.flat.get(shape, region, self._scoring())
        nodes, group = state.nodes, state.group
        counts, live, prefers = self._preferred(shape, nodes, *self._limits(state, shape))
        avail = int(counts.sum())
        need = len(pods)
        if avail < need and not partial:
            self.refused = self._capped  # for ``failure``
            return 0
        need = min(need, avail)
        packs = all(wp.policy.packs for wp in self.config.policies if wp.weight)
        placed = 0
        while placed < need:
            i = int(np.argmax(live))
            batch = [i]
            # a group fills in score order while it outscores the rest -- not with the
            # pods' own share added, which is normalized again as nodes fill up
            if packs and need - placed > 1 and not prefers:
                members = np.flatnonzero((group == group[i]) & (counts > 0))
                saved = live[members].copy()
                live[members] = -np.inf
                outside = float(live.max())
                live[members] = saved
                order = members[np.lexsort((members, -saved))]
                batch = order[live[order] >= outside].tolist() or [i]
            plan: list[tuple[int, int]] = []  # the batch's nodes in order, one write
            start = placed
            for j in batch:
                if placed >= need:
                    break
                k = min(int(counts[j]), need - placed) if packs else 1
                plan.append((int(nodes[j]), k))
                placed += k
            self.txn.place_plan(pods[start:placed], plan, shape.vec)
            if placed >= need:
                break  # the kept state is brought up to date when next asked for (``get``)
            self.flat.refresh(state, shape, region)
            counts, live, prefers = self._preferred(shape, nodes, *self._limits(state, shape))
        return placed
