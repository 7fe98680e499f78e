"""Balanced placement: Kueue's ``TASBalancedPlacement`` (alpha, off unless the scheduler
config says ``featureGates: {TASBalancedPlacement: true}``, Kueue's own key).

For a PodSet with a *preferred* level (``podset-preferred-topology``; never a required
or unconstrained one, as in Kueue), Kueue spreads the pods evenly below that level
instead of filling domains greedily, and chooses the parent domain by the threshold it
reaches there (``pkg/cache/scheduler/tas_balanced_placement.go``; the steps are in
``balanced_plan.py``). Here the plan is made once per attempt, when the search first
counts the gang's room, from the room every node has for the gang's pods (eligibility
and the ledger, the gang's own tentative pods given back), and it is handed to the
search as per-node caps: each node of the plan may take its share, every other node
none. So the search finds the one domain that holds the plan, and node choice inside it
places exactly the shares. Where Kueue finds no balanced placement it falls back to
best fit, and so does tierra (no caps).

Kueue's levels are tierra's tiers: the trees holding the preferred tier (or the slice
tier), levels from the top tier down, the nodes last (a level no HyperNode was
discovered from whose domains are single nodes, such as ``kubernetes.io/hostname``, is
the node level). Not balanced, so best fit as before: a gang with pods running, with a
PodGroup ``networkTopology`` of its own, with a leader PodSet (``podset-group-name``),
with multi-layer slices, with pods of more than one shape, or whose trees share nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.podgroup import TopologyMode
from tierra.api.workload import SYNTHETIC_ANNOTATION
from tierra.scheduler.constraints.balanced_plan import Dom, Request, fill, plan
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.gang import Gang
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import TopologyIndex

GATE = "TASBalancedPlacement"


@dataclass(frozen=True, slots=True)
class _Ask:
    """What a gang asks of balanced placement, in tier names (None: the node level)."""

    count: int
    size: int
    preferred: str | None
    slice_tier: str | None


def _node_level(ix: TopologyIndex, tier_name: str) -> bool:
    """Whether a tier's domains are single nodes made from a node label (hostname)."""
    doms = ix.by_tier_name(tier_name)
    return bool(doms) and all(
        SYNTHETIC_ANNOTATION in ix.hypernodes[h].meta.annotations and len(ix.real_nodes[h]) == 1
        for h in doms
    )


def _asked(gang: Gang, ix: TopologyIndex) -> _Ask | None:
    """The gang's request when Kueue would balance it (module docstring), else None."""
    shape, topo = gang.kueue, gang.topology
    if shape is None or topo is None or gang.running or shape.inner:
        return None
    if topo.mode is not TopologyMode.SOFT or topo.preferred_tier_name is None:
        return None
    if topo.highest_tier_name is not None or topo.highest_tier_allowed is not None:
        return None
    if len({tuple(sorted(p.requests.items())) for p in gang.pending}) != 1:
        return None
    size, slice_tier = 1, None
    if shape.parts:
        if shape.loose or any("-slice-" not in p.id for p in shape.parts):
            return None  # a leader and its workers: not balanced here
        sizes = {p.size for p in shape.parts}
        tiers = {p.topology.highest_tier_name for p in shape.parts if p.topology is not None}
        if len(sizes) != 1 or len(tiers) != 1:
            return None
        size, slice_tier = sizes.pop(), tiers.pop()
    preferred: str | None = topo.preferred_tier_name
    if _node_level(ix, topo.preferred_tier_name):
        preferred = None
    if slice_tier is not None and _node_level(ix, slice_tier):
        slice_tier = None
    return _Ask(len(gang.pending), size, preferred, slice_tier)


def _trees(ix: TopologyIndex, ask: _Ask) -> list[int]:
    """The trees Kueue's topology is: those holding the named tiers, else every tree
    made by discovery (none synthetic)."""
    named = [t for t in (ask.preferred, ask.slice_tier) if t is not None]
    if named:
        return sorted({int(ix.tree_of[h]) for t in named for h in ix.by_tier_name(t)})
    return [
        t.id
        for t in ix.trees
        if t.usable
        and not any(SYNTHETIC_ANNOTATION in ix.hypernodes[h].meta.annotations for h in t.hypernodes)
    ]


def _build(
    ix: TopologyIndex, h: int, prefix: tuple[str, ...], levels: dict[int, int], counts: IntArray
) -> Dom | None:
    """Domain ``h`` with its children and nodes that have room (None: no room at all)."""
    key = (*prefix, ix.names[h])
    last = len(levels)
    kids = [d for c in ix.children[h] if (d := _build(ix, c, key, levels, counts)) is not None]
    for n in ix.direct_nodes[h].tolist():
        if counts[n] > 0:
            kids.append(Dom((*key, ix.node_names[n]), last, node=n, pods=int(counts[n])))
    return Dom(key, levels[int(ix.tier[h])], kids) if kids else None


def _at(doms: list[Dom], level: int) -> list[Dom]:
    out: list[Dom] = []
    for d in doms:
        if d.level == level:
            out.append(d)
        elif d.level < level:
            out.extend(_at(d.kids, level))
    return out


def quotas(store: ClusterStore, ask: _Ask, counts: IntArray) -> dict[int, int] | None:
    """Pods per node under Kueue's balanced placement, for pods that fit ``counts`` per
    node; None when it does not apply or finds nothing (best fit then)."""
    ix = store.index
    trees = _trees(ix, ask)
    tiers = sorted({t for i in trees for t in ix.trees[i].tiers}, reverse=True)
    levels = {t: i for i, t in enumerate(tiers)}
    last = len(tiers)

    def level(name: str | None) -> int | None:
        t = ix.tier_of_name(name) if name is not None else None
        return last if name is None else (levels.get(t) if t is not None else None)

    pref, cut = level(ask.preferred), level(ask.slice_tier)
    if pref is None or cut is None or pref > cut or not trees:
        return None
    tops = [
        d
        for i in trees
        for h in ix.trees[i].hypernodes
        if int(ix.parent[h]) == ix.root and (d := _build(ix, h, (), levels, counts)) is not None
    ]
    leaves = [x.node for d in tops for x in d.leaves()]
    if len(leaves) != len(set(leaves)):
        return None  # trees sharing nodes: no one topology to balance over
    req = Request(ask.count, ask.size, pref, cut)
    for d in tops:
        fill(d, req)
    if pref == 0:
        groups = [sorted(tops, key=lambda d: d.key)]
    else:
        parents = sorted(_at(tops, pref - 1), key=lambda d: d.key)
        groups = [[k for k in p.kids if k.level == pref] for p in parents]
    return plan(groups, req, last)


def _placed(cycle: Cycle, gang: Gang) -> IntArray:
    """The gang's pods this attempt placed already, per node."""
    out = np.zeros(len(cycle.store.index.node_names), dtype=np.int64)
    mine = {p.key for p in gang.pending}
    for pod, node, _ in cycle.overlay.assigned:
        if pod.key in mine:
            out[node] += 1
    return out


@dataclass(frozen=True, slots=True)
class BalancedPlacement(Constraint):
    """Kueue's balanced placement for Kueue's preferred PodSets, as per-node caps."""

    name = "kueue-balanced-placement"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # caps Kueue gangs' pods only: a lone pod has no Kueue shape

    def _caps(self, cycle: Cycle, gang: Gang, shape: Shape) -> tuple[IntArray, IntArray] | None:
        """The plan as caps over every node, with the request it was made for."""
        ask = _asked(gang, cycle.store.index)
        if ask is None:
            return None
        placed = _placed(cycle, gang)
        counts = cycle.store.capacity.fit_counts(shape.vec, shape.eligibility.mask) + placed
        got = quotas(cycle.store, ask, counts)
        if got is None:
            return None
        caps = np.zeros(len(counts), dtype=np.int64)
        caps[list(got)] = list(got.values())
        return caps, shape.vec

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        gang = cycle.gang
        if gang is None or gang.kueue is None:
            return None
        kept = cycle.data.get(self.name)
        if kept is None or kept[0] is not gang:
            kept = (gang, self._caps(cycle, gang, shape))
            cycle.data[self.name] = kept
        made = kept[1]
        if made is None or not np.array_equal(made[1], shape.vec):
            return None
        caps: IntArray = made[0] - _placed(cycle, gang)
        return caps[nodes]

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "balanced", capped)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        return (
            f"Kueue's balanced placement keeps the gang to its plan ({refusal.count} "
            "node(s) hold less or nothing)"
        )
