"""Exclusive domains (Slurm's ``--exclusive=topo``): a gang that holds whole domains.

A PodGroup asks with ``topology.tierra.dev/exclusive-tier`` (a tier number, or a
``tierName`` looked up per tree): every domain of that tier holding one of its pods is
its own while it runs. Two sides, both per node and per domain, arrays only:

* the exclusive gang (``node_caps``): only nodes whose domain of that tier holds no
  other gang's pod may take its pods (its own running and just-placed pods aside), so
  it lands in clean domains only; a node under no domain of that tier takes none;
* everyone else: the nodes of held domains take no pod (``node_caps``), held domains
  are no candidates (``candidates``: ``allowed`` False), and a wider domain's free room
  is counted without the idle room of the held domains inside it (``excluded`` where
  ``dom_alloc - dom_used - held idle`` does not cover the gang: the search's
  per-domain sums, the roll-up, otherwise count it as free).

Which domains are held is read from the store (the exclusive gangs' pods, bound or
assumed by this session), recomputed when the store's event clock or its assumed pods
move; the per-tier node-to-domain map is kept per topology. Both are memos kept beside
the store (a weak mapping: hooks never write the store), derived data with no state of
their own.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.podgroup import PodGroup
from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal
from tierra.scheduler.status import Status, unresolvable
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray, TopologyIndex

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Demand, Shape
    from tierra.scheduler.state.store import ClusterStore

EXCLUSIVE_TIER = "topology.tierra.dev/exclusive-tier"
NO_CAP = 1 << 30
PODS = "pods"


def exclusive_tiers(pg: PodGroup | None, index: TopologyIndex) -> tuple[int, ...] | str | None:
    """The tier ``pg`` holds whole, per tree (-1: a tree without it); None when it asks
    for none; text when the annotation cannot be honoured."""
    if pg is None:
        return None
    raw = pg.meta.annotations.get(EXCLUSIVE_TIER)
    if raw is None:
        return None
    value = raw.strip()
    where = f"metadata.annotations[{EXCLUSIVE_TIER}]"
    if value.isdigit():
        return (int(value),) * len(index.trees)
    found = tuple(t.tier_names.get(value, -1) if t.usable else -1 for t in index.trees)
    if not value or (index.trees and all(t < 0 for t in found)):
        names = sorted({n for t in index.trees if t.usable for n in t.tier_names})
        return f"{where}: {raw!r} names no tier (known tier names: {', '.join(names) or 'none'})"
    return found


def exclusive_problem(pg: PodGroup | None, index: TopologyIndex) -> Status | None:
    """Why ``pg``'s exclusive tier cannot be honoured here (``UNRESOLVABLE``), or None
    (admit, validate, the webhook)."""
    found = exclusive_tiers(pg, index)
    return unresolvable(found) if isinstance(found, str) else None


@dataclass(slots=True)
class _Held:
    """What the exclusive gangs hold, at one state of the store."""

    at: tuple[int, int, int] = (-1, -1, -1)
    gangs: dict[str, tuple[int, ...]] = field(default_factory=dict)  # gang -> its tiers
    pg_clock: int = -1  # the PodGroups table (identity and size) ``gangs`` was read from
    node_owner: dict[int, str] = field(default_factory=dict)  # held node -> gang
    nodes: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    domains: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    idle: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))


@dataclass(slots=True)
class _Memo:
    held: _Held = field(default_factory=_Held)
    maps: dict[object, IntArray] = field(default_factory=dict)


# Derived data per store, beside it rather than in it: hooks never write the store.
_MEMOS: weakref.WeakKeyDictionary[ClusterStore, _Memo] = weakref.WeakKeyDictionary()


def _memo(store: ClusterStore) -> _Memo:
    found = _MEMOS.get(store)
    if found is None:
        found = _MEMOS[store] = _Memo()
    return found


def _node_domain(store: ClusterStore, tiers: tuple[int, ...]) -> IntArray:
    """Per node, its domain of tier ``tiers[tree]`` (-1: none); kept per topology."""
    memo = _memo(store).maps
    key = (store.index, tiers)  # the index itself: an id could be reused once it is freed
    found = memo.get(key)
    if found is None:
        ix = store.index
        found = np.full(len(ix.node_names), -1, dtype=np.int64)
        for h in range(ix.root):
            tree = int(ix.tree_of[h])
            if tree >= 0 and ix.usable[h] and int(ix.tier[h]) == tiers[tree]:
                found[ix.real_nodes[h]] = h
        if len(memo) > 8:  # topologies come and go: keep a few
            memo.clear()
        memo[key] = found
    return found


def _exclusive_gangs(store: ClusterStore, held: _Held) -> dict[str, tuple[int, ...]]:
    """The PodGroups asking for whole domains. A session runs over a view of the store
    whose PodGroups do not change while it runs (``state/view.py``), so they are looked
    for once per view, not once per commit (the event clock moves with every one)."""
    table = id(store.podgroups) * 1_000_003 + len(store.podgroups)
    if held.pg_clock != table:
        held.gangs = {}
        pgs = store.podgroups  # one dict look-up each, in a comprehension: most do not ask
        asking = [(key, pg) for key, pg in pgs.items() if EXCLUSIVE_TIER in pg.meta.annotations]
        for key, pg in asking:
            tiers = exclusive_tiers(pg, store.index)
            if isinstance(tiers, tuple):
                held.gangs[key] = tiers
        held.pg_clock = table
    return held.gangs


def held_now(store: ClusterStore) -> _Held:
    """The domains exclusive gangs hold now, their nodes and idle room (memo)."""
    held = _memo(store).held
    at = (store.clock, len(store.assumed), len(store.node_of))
    if held.at == at:
        return held
    gangs = _exclusive_gangs(store, held)
    held.at = at
    if not gangs:  # the common case: nothing held, nothing to count
        held.node_owner, held.domains = {}, np.zeros(0, dtype=np.int64)
        return held
    n_nodes = len(store.index.node_names)
    nodes = np.zeros(n_nodes, dtype=bool)
    owner: dict[int, str] = {}
    doms: set[int] = set()
    for key, tiers in gangs.items():
        mine = [store.node_of[p] for p in store.members.get(key, {}) if p in store.node_of]
        if not mine:
            continue
        node_dom = _node_domain(store, tiers)
        taken = {int(d) for d in node_dom[np.asarray(mine, dtype=np.int64)] if d >= 0}
        for d in taken:
            inside = store.index.real_nodes[d]
            nodes[inside] = True
            owner.update(dict.fromkeys(inside.tolist(), key))
        doms |= taken
    held.idle = _idle(store, np.flatnonzero(nodes))
    held.nodes, held.node_owner = nodes, owner
    lay = store.layouts
    held.domains = np.asarray(sorted(doms, key=lambda d: int(lay.tin[d])), dtype=np.int64)
    return held


def _idle(store: ClusterStore, rows: IntArray) -> IntArray:
    """Per domain, the free room of the held nodes ``rows`` under it: each row's room
    added to every domain holding it, in one scatter (the held nodes of a busy cluster
    are hundreds, and this is asked again whenever the store's clock moves)."""
    cap, ix = store.capacity, store.index
    idle = np.zeros_like(cap.dom_alloc)
    if not len(rows):
        return idle
    room = np.maximum(cap.node_alloc[rows] - cap.node_used[rows], 0)
    starts = ix.domain_ptr[rows]
    lens = ix.domain_ptr[rows + 1] - starts
    first = np.repeat(np.cumsum(lens) - lens, lens)
    entries = np.arange(int(lens.sum()), dtype=np.int64) - first + np.repeat(starts, lens)
    np.add.at(idle, ix.domain_idx[entries], np.repeat(room, lens, axis=0))
    return idle


@dataclass(frozen=True, slots=True)
class ExclusiveDomains(Constraint):
    """Whole domains for gangs that ask, none of theirs for others (module docstring)."""

    name = "exclusive"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # held domains, not the gang, cap a pod without the annotation

    def applies(self, cycle: Cycle) -> bool:
        """For a gang asking for whole domains, or while any PodGroup does (its domains
        are held from the others); the store's PodGroups do not change in an attempt."""
        gang, store = cycle.gang, cycle.store
        pg = gang.podgroup if gang is not None else None
        if gang is None or (pg is not None and EXCLUSIVE_TIER in pg.meta.annotations):
            return True
        return bool(_exclusive_gangs(store, _memo(store).held))

    def admit(self, cycle: Cycle, demand: Demand) -> Status | None:
        gang = cycle.gang
        if gang is None or gang.podgroup is None:
            return None
        return exclusive_problem(gang.podgroup, cycle.store.index)

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        store, gang = cycle.store, cycle.gang
        pg = gang.podgroup if gang is not None else None
        if pg is not None and EXCLUSIVE_TIER in pg.meta.annotations:
            mine = exclusive_tiers(pg, store.index)
            if isinstance(mine, tuple) and gang is not None:
                return self._clean(cycle, mine, nodes)
        known = _memo(store).held
        if not _exclusive_gangs(store, known):  # the hot path: nobody asks for any
            return None
        held = held_now(store)
        if not held.node_owner:
            return None
        return np.where(held.nodes[nodes], 0, NO_CAP).astype(np.int64)

    def _clean(self, cycle: Cycle, tiers: tuple[int, ...], nodes: IntArray) -> IntArray:
        """For the exclusive gang: nodes whose domain holds no other gang's pod."""
        store, gang = cycle.store, cycle.gang
        assert gang is not None
        node_dom = _node_domain(store, tiers)
        col = store.capacity.axis.index.get(PODS)
        used = store.capacity.node_used
        pods: IntArray = np.asarray(
            used[:, col] // 1000 if col is not None else (used > 0).any(axis=1), dtype=np.int64
        )
        own = np.zeros(len(node_dom), dtype=np.int64)
        keys = gang_pod_keys(cycle)
        for p, at, _ in cycle.overlay.assigned:
            if p.key in keys:
                own[at] += 1
        for p in gang.running:
            on = store.node_of.get(p.key)
            if on is not None:
                own[on] += 1
        foreign = np.maximum(pods - own, 0)
        inside = node_dom >= 0
        per_dom = np.bincount(
            node_dom[inside], weights=foreign[inside], minlength=store.index.root + 1
        )
        dirty = np.ones(len(node_dom), dtype=bool)
        dirty[inside] = per_dom[node_dom[inside]] > 0
        return np.where(dirty[nodes], 0, NO_CAP).astype(np.int64)

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        gang = cycle.gang
        mine = isinstance(
            exclusive_tiers(gang.podgroup if gang else None, cycle.store.index), tuple
        )
        return Refusal(self, "shared" if mine else "held", capped)

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        store, gang = cycle.store, cycle.gang
        if isinstance(exclusive_tiers(gang.podgroup if gang else None, store.index), tuple):
            return None
        held = held_now(store)
        if not len(held.domains):
            return None
        lay = store.layouts
        tins, touts = lay.tin[held.domains], lay.tout[held.domains]
        pos = np.searchsorted(tins, lay.tin[domains], side="right") - 1
        within = (pos >= 0) & (lay.tin[domains] < touts[np.maximum(pos, 0)])
        free = store.capacity.dom_alloc[domains] - store.capacity.dom_used[domains]
        free = free - held.idle[domains]
        room: BoolArray = np.asarray((free >= ask.demand.total).all(axis=1), dtype=bool)
        n = int(within.sum() + (~room & ~within).sum())
        return Candidacy(allowed=~within, excluded=room, refusal=Refusal(self, "held", n))

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what == "shared":
            return (
                f"{refusal.count} nodes under domains other gangs' pods use "
                f"({EXCLUSIVE_TIER}: this gang takes whole domains)"
            )
        return f"{refusal.count} nodes or domains held by exclusive gangs ({EXCLUSIVE_TIER})"


def gang_pod_keys(cycle: Cycle) -> frozenset[str]:
    """The keys of the gang's pods (per attempt, in ``cycle.data``)."""
    found: frozenset[str] | None = cycle.data.get("exclusive.pods")
    if found is None:
        gang = cycle.gang
        assert gang is not None
        found = cycle.data["exclusive.pods"] = frozenset(
            p.key for p in (*gang.pending, *gang.running)
        )
    return found
