"""Balanced placement: Kueue's ``TASBalancedPlacement`` (alpha, off unless the scheduler
config says ``featureGates: {TASBalancedPlacement: true}``, Kueue's own key).

For a PodSet with a *preferred* level (``podset-preferred-topology``; never a required
or unconstrained one, as in Kueue), Kueue spreads the pods evenly below that level
instead of filling domains greedily, and chooses the parent domain by the threshold it
reaches there (``pkg/cache/scheduler/tas_balanced_placement.go``; the steps are in
``balanced_plan.py``). A PodSet group's leader (``podset-group-name``: one leader pod
beside the workers) is counted as Kueue counts it: where it fits, what room it leaves
the workers, which domain takes it. Here the plan is made once per attempt, when the
search first counts the gang's room, from the room every node has for the gang's pods
(eligibility and the ledger, the gang's own tentative pods given back), and it is handed
to the search as per-node caps: each node of the plan may take its share of workers (and
the leader's node the leader), every other node none. So the search finds the one
domain that holds the plan, and node choice inside it places exactly the shares. Where
the leader and its workers ask for the same resources they are one pod shape, so node
choice may put the leader on any node of the plan: ``reserve`` then swaps it with a
worker on the leader's node (the rooms are the same), and rank order leaves it there.
Where Kueue finds no balanced placement it falls back to its best fit, and so does
tierra: the same caps from Kueue's best fit (``fit_plan``), and no caps where that finds
nothing either.

Kueue's levels are tierra's tiers: the trees holding the preferred tier (or the slice
tier), levels from the top tier down, the nodes last (``kubernetes.io/hostname`` is the
node level; a tier of HyperNodes made from it is no level of its own). Not balanced, so
best fit as before: a gang with pods running, with a PodGroup ``networkTopology`` of its
own, with multi-layer slices, with workers of more than one shape, with more than one
leader, or whose trees share nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.kueue_forest import NODE_LEVEL
from tierra.api.pod import Pod
from tierra.api.podgroup import TopologyMode
from tierra.api.workload import SYNTHETIC_ANNOTATION
from tierra.scheduler.constraints.balanced_plan import (
    Dom,
    Plan,
    Request,
    at_level,
    fill,
    fit_plan,
    plan,
)
from tierra.scheduler.constraints.kueue_resolve import NODE
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.scheduler.constraints.rank_order import FIXED
from tierra.topology.arrays import BoolArray, fit_counts
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

    count: int  # workers
    size: int
    preferred: str | None
    slice_tier: str | None
    workers: tuple[Pod, ...]
    leader: Pod | None


@dataclass(frozen=True, slots=True)
class _Room:
    """Per node: workers that fit, whether the leader fits, workers beside it."""

    pods: IntArray
    leader: IntArray
    beside: IntArray


def _asked(gang: Gang) -> _Ask | None:
    """The gang's request when Kueue would balance it (module docstring), else None."""
    shape, topo = gang.kueue, gang.topology
    if shape is None or topo is None or gang.running or shape.inner:
        return None
    if topo.mode is not TopologyMode.SOFT or shape.preferred is None:
        return None
    if topo.highest_tier_name is not None or topo.highest_tier_allowed is not None:
        return None
    leaders = [p for p in gang.pending if p.key in shape.leaders]
    workers = tuple(p for p in gang.pending if p.key not in shape.leaders)
    if len(leaders) > 1 or len({tuple(sorted(p.requests.items())) for p in workers}) != 1:
        return None
    size, slice_tier = 1, None
    if shape.parts:
        if {p.key for p in shape.loose} != {p.key for p in leaders}:
            return None  # pods outside the slices besides the leader
        if any("-slice-" not in p.id for p in shape.parts):
            return None
        sizes = {p.size for p in shape.parts}
        tiers = {p.tier for p in shape.parts}
        if len(sizes) != 1 or len(tiers) != 1:
            return None
        size, slice_tier = sizes.pop(), tiers.pop()
    preferred = None if shape.preferred == NODE else shape.preferred
    slice_tier = None if slice_tier == NODE else slice_tier
    leader = leaders[0] if leaders else None
    return _Ask(len(workers), size, preferred, slice_tier, workers, leader)


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
    ix: TopologyIndex, h: int, prefix: tuple[str, ...], levels: dict[int, int], room: _Room
) -> Dom | None:
    """Domain ``h`` with its children and nodes that have room (None: no room at all);
    a child of a tier that is no level (one discovered from the hostname label) gives its
    nodes to ``h``, as the node level is the node."""
    key = (*prefix, ix.names[h])
    last = len(levels)
    kids: list[Dom] = []
    nodes = ix.direct_nodes[h].tolist()
    for c in ix.children[h]:
        if int(ix.tier[c]) not in levels:
            nodes.extend(ix.real_nodes[c].tolist())
        elif (d := _build(ix, c, key, levels, room)) is not None:
            kids.append(d)
    for n in sorted(nodes, key=lambda n: ix.node_names[n]):
        if room.pods[n] > 0 or room.leader[n] > 0:
            pods, lead = int(room.pods[n]), int(room.leader[n])
            beside = int(room.beside[n]) if lead else pods
            leaf = Dom((*key, ix.node_names[n]), last, node=n, pods=pods, pods_l=beside)
            leaf.leaders = lead
            kids.append(leaf)
    return Dom(key, levels[int(ix.tier[h])], kids) if kids else None


def quotas(store: ClusterStore, ask: _Ask, room: _Room) -> Plan | None:
    """Workers per node and the leader's node under Kueue's balanced placement, for pods
    with ``room``; None when it does not apply or finds nothing (best fit then)."""
    ix = store.index
    trees = _trees(ix, ask)
    hosts = {ix.trees[i].tier_names.get(NODE_LEVEL) for i in trees}
    tiers = sorted({t for i in trees for t in ix.trees[i].tiers} - hosts, reverse=True)
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
        if int(ix.parent[h]) == ix.root
        and int(ix.tier[h]) in levels
        and (d := _build(ix, h, (), levels, room)) is not None
    ]
    leaves = [x.node for d in tops for x in d.leaves()]
    if len(leaves) != len(set(leaves)):
        return None  # trees sharing nodes: no one topology to balance over
    req = Request(ask.count, ask.size, pref, cut, 1 if ask.leader is not None else 0)
    for d in tops:
        fill(d, req)
    if pref == 0:
        groups = [sorted(tops, key=lambda d: d.key)]
    else:
        parents = sorted(at_level(tops, pref - 1), key=lambda d: d.key)
        groups = [[k for k in p.kids if k.level == pref] for p in parents]
    return plan(groups, req, last) or fit_plan(tops, req, last)


def _placed(cycle: Cycle, gang: Gang) -> tuple[IntArray, IntArray, list[int]]:
    """The gang's pods this attempt placed already, per node: workers, leaders; and the
    rows of ``cycle.overlay.assigned`` holding them (the gang's are the latest)."""
    n = len(cycle.store.index.node_names)
    workers, leaders = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    shape = gang.kueue
    mine = {p.key for p in gang.pending}
    rows = []
    assigned = cycle.overlay.assigned
    for i in range(len(assigned) - 1, -1, -1):
        pod, node, _ = assigned[i]
        if pod.key not in mine:
            break
        rows.append(i)
        if shape is not None and pod.key in shape.leaders:
            leaders[node] += 1
        else:
            workers[node] += 1
    return workers, leaders, rows


def _room(cycle: Cycle, ask: _Ask, rows: list[int]) -> _Room:
    """Each node's room for the gang's workers and leader, its own tentative pods given
    back."""
    store = cycle.store
    cap = store.capacity
    free = cap.node_alloc - cap.node_used
    for i in rows:
        _, node, vec = cycle.overlay.assigned[i]
        free[node] += vec
    w_vec, w_mask = _role(cycle, ask.workers[0])
    pods = np.where(w_mask, fit_counts(free, w_vec, unlimited=cap.unlimited), 0).astype(np.int64)
    if ask.leader is None:
        return _Room(pods, np.zeros(len(pods), dtype=np.int64), pods)
    l_vec, l_mask = _role(cycle, ask.leader)
    fits = l_mask & (fit_counts(free, l_vec, unlimited=cap.unlimited) > 0)
    beside = np.where(w_mask, fit_counts(free - l_vec, w_vec, unlimited=cap.unlimited), 0)
    return _Room(pods, fits.astype(np.int64), np.where(fits, beside, pods).astype(np.int64))


def _role(cycle: Cycle, pod: Pod) -> tuple[IntArray, BoolArray]:
    """A pod's request on the ledger axis and the nodes the node-mask constraints let
    it use (as ``placement.demand`` works them out for a shape)."""
    from tierra.scheduler.constraints.registry import hooks  # noqa: PLC0415 (imports us)

    store = cycle.store
    mask = np.ones(len(store.index.node_names), dtype=bool)
    for c in hooks(cycle.config.constraints).node_mask:
        got = c.node_mask(store, pod)
        if got is not None:
            mask &= got.mask
    return store.request_vector(pod), mask


def balancing(cycle: Cycle, gang: Gang) -> bool:
    """Whether this attempt places ``gang`` by a balanced plan (its caps then say where
    each slice goes)."""
    kept = cycle.data.get(BalancedPlacement.name)
    return kept is not None and kept[0] is gang and kept[1] is not None


@dataclass(frozen=True, slots=True)
class _Caps:
    """A plan as caps over every node: workers, and the leader's node."""

    workers: IntArray
    leader: IntArray
    node: int  # the leader's (-1: none)


def _swap_leader(cycle: Cycle, gang: Gang, made: _Caps, rows: list[int]) -> None:
    """Put the leader on its node where node choice put a worker of the same request
    there instead (the rooms are the same), and keep rank order off it."""
    assert gang.kueue is not None
    assigned = cycle.overlay.assigned
    at = next((i for i in rows if assigned[i][0].key in gang.kueue.leaders), None)
    if at is None:
        return
    pod, node, vec = assigned[at]
    cycle.data.setdefault(FIXED, set()).add(pod.key)
    if node == made.node:
        return
    for i in rows:
        other, there, ovec = assigned[i]
        if there == made.node and other.key not in gang.kueue.leaders and (ovec == vec).all():
            assigned[i] = (other, node, ovec)
            assigned[at] = (pod, made.node, vec)
            return


@dataclass(frozen=True, slots=True)
class BalancedPlacement(Constraint):
    """Kueue's balanced placement for Kueue's preferred PodSets, as per-node caps."""

    name = "kueue-balanced-placement"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # caps Kueue gangs' pods only: a lone pod has no Kueue shape

    def applies(self, cycle: Cycle) -> bool:
        gang = cycle.gang
        return gang is None or gang.kueue is not None

    def _caps(self, cycle: Cycle, gang: Gang) -> _Caps | None:
        """The plan as caps over every node."""
        ask = _asked(gang)
        if ask is None:
            return None
        room = _room(cycle, ask, _placed(cycle, gang)[2])
        got = quotas(cycle.store, ask, room)
        if got is None:
            return None
        workers = np.zeros(len(room.pods), dtype=np.int64)
        workers[list(got.workers)] = list(got.workers.values())
        leader = np.zeros(len(workers), dtype=np.int64)
        if got.leader >= 0:
            leader[got.leader] = 1
        return _Caps(workers, leader, got.leader)

    def _made(self, cycle: Cycle, gang: Gang) -> _Caps | None:
        kept = cycle.data.get(self.name)
        if kept is None or kept[0] is not gang:
            kept = (gang, self._caps(cycle, gang))
            cycle.data[self.name] = kept
        made: _Caps | None = kept[1]
        return made

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        gang = cycle.gang
        if gang is None or gang.kueue is None:
            return None
        made = self._made(cycle, gang)
        if made is None:
            return None
        leaders = gang.kueue.leaders
        lead = sum(1 for p in shape.pods if p.key in leaders)
        placed_w, placed_l, _ = _placed(cycle, gang)
        caps = np.zeros(len(made.workers), dtype=np.int64)
        if lead < len(shape.pods):
            caps += made.workers - placed_w
        if lead:
            caps += made.leader - placed_l
        out: IntArray = caps[nodes]
        return out

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        gang = cycle.gang
        if gang is None or gang.kueue is None or not gang.kueue.leaders:
            return None
        kept = cycle.data.get(self.name)
        made = kept[1] if kept is not None and kept[0] is gang else None
        if made is not None and made.node >= 0:
            _swap_leader(cycle, gang, made, _placed(cycle, gang)[2])
        return None

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "balanced", capped)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        return (
            f"Kueue's balanced placement keeps the gang to its plan ({refusal.count} "
            "node(s) hold less or nothing)"
        )
