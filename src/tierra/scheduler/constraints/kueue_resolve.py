"""Kueue's levels (node-label keys) as tierra's tiers, as Kueue resolves a Topology's levels.

In Kueue (``pkg/cache/scheduler/tas_flavor_snapshot.go`` at v0.19.2) a level is a node
label: its domains are the nodes sharing the values of it and of every level above, and
``kubernetes.io/hostname`` as the last level is the node itself. Here, for the levels a
gang names:

* ``kubernetes.io/hostname`` is the node level (``NODE``), always, whether or not any
  HyperNode was discovered from it: one node holds each group of pods it asks for;
* another level is a tier of the HyperNodes where one stands for it: the tier label
  discovery made from that label (``topology.tierra.dev/source-detail``), else a named
  tier of a usable tree whose domains *coincide* with the label's values -- each domain's
  nodes all carry one value, each is every node of its parent (the whole cluster at the
  top) with that value, together they hold every node carrying the label, and no other
  HyperNode has the name. Then the gang gets that tree's scoring and health;
* else the level is a tier of the forest the nodes' label values make
  (``tierra.api.kueue_forest``; one per group of levels sharing nodes):
  ``wanted_forest`` says what the store should hold, and
  ``ClusterStore.from_snapshot`` and the scheduler's feed add it. Only where needed: a
  forest beside a tree that stands for the same levels would be a second topology over
  the same nodes.

A gang's levels resolve together: all to HyperNode tiers when each has one and every
inner level's domains lie inside the outer level's (slices inside their PodSet's level),
else all to the forest, whose levels are ordered top first (a gang naming an inner level
above an outer one waits with a reason, as Kueue refuses a slice level above its PodSet's).
What is worked out of the index is kept per index (``ClusterStore.generation``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tierra.api.hypernode import HyperNode
from tierra.api.kueue_forest import (
    NODE_LEVEL,
    forest_levels,
    forest_tiers,
    label_forest,
    level_groups,
)
from tierra.api.workload import SYNTHETIC_ANNOTATION, discovered_tier

if TYPE_CHECKING:
    from tierra.api.hypernode import HyperNodeKey
    from tierra.api.node import Node
    from tierra.topology.index import IntArray, TopologyIndex


class LevelStore(Protocol):
    """What level resolution reads of a ``ClusterStore`` (the scheduler's feed passes its
    own view of one)."""

    extensions: dict[str, object]
    generation: int
    index: TopologyIndex
    hypernodes: dict[HyperNodeKey, HyperNode]

    @property
    def nodes(self) -> list[Node]: ...


NAME = "kueue-levels"
NODE = "<node>"  # the node level's tier (no HyperNode's: a tierName is never this)


@dataclass(slots=True)
class _Book:
    """What the store's current index makes of levels (kept per generation)."""

    generation: int
    forest: dict[str, str]
    order: tuple[str, ...]
    real: dict[str, str | None] = field(default_factory=dict)
    nests: dict[tuple[str, str], bool] = field(default_factory=dict)
    wanted: dict[frozenset[str], list[HyperNode]] = field(default_factory=dict)


def _book(store: LevelStore) -> _Book:
    kept = store.extensions.get(NAME)
    if isinstance(kept, _Book) and kept.generation == store.generation:
        return kept
    hns = store.index.hypernodes
    book = _Book(store.generation, forest_tiers(hns), forest_levels(hns))
    store.extensions[NAME] = book
    return book


def _codes(store: LevelStore, key: str) -> IntArray:
    """Each node's value of label ``key`` as a number (-1: the node lacks it)."""
    seen: dict[str, int] = {}
    out = np.full(len(store.index.node_names), -1, dtype=np.int64)
    for i, node in enumerate(store.nodes):
        v = node.labels.get(key)
        if v is not None:
            out[i] = seen.setdefault(v, len(seen))
    return out


def _coincide(ix: TopologyIndex, codes: IntArray, doms: Sequence[int]) -> bool:
    """Whether ``doms`` are exactly the label's domains (the module docstring)."""
    covered = 0
    counts: dict[int, IntArray] = {}
    for h in doms:
        nodes = ix.real_nodes[h]
        mine = codes[nodes]
        if len(nodes) == 0 or mine[0] < 0 or (mine != mine[0]).any():
            return False
        up = int(ix.parent[h])
        if up not in counts:
            within = codes if up == ix.root else codes[ix.real_nodes[up]]
            counts[up] = np.bincount(within[within >= 0], minlength=int(codes.max()) + 1)
        if int(counts[up][mine[0]]) != len(nodes):
            return False
        covered += len(nodes)
    return covered == int((codes >= 0).sum())


def _real(store: LevelStore, key: str) -> str | None:
    """The HyperNode tier standing for level ``key``, if one does."""
    ix = store.index
    hns = ix.hypernodes
    real = [h for h in hns if SYNTHETIC_ANNOTATION not in h.meta.annotations]
    found = discovered_tier(key, real)
    if found is not None:
        return found
    names = sorted(
        {n for t in ix.trees if t.usable for n in t.tier_names}, key=lambda n: (n != key, n)
    )
    codes: IntArray | None = None
    for name in names:
        doms = ix.by_tier_name(name, usable_only=False)
        if any(SYNTHETIC_ANNOTATION in hns[h].meta.annotations or not ix.usable[h] for h in doms):
            continue
        if codes is None:
            codes = _codes(store, key)
            if not (codes >= 0).any():
                return None
        if _coincide(ix, codes, doms):
            return name
    return None


def wanted_forest(store: LevelStore, keys: Iterable[str]) -> list[HyperNode]:
    """The label forests the store should hold for Kueue levels ``keys`` (the levels the
    pods and PodGroups name), per group of levels sharing nodes (``level_groups``): none
    for a group whose levels each have a HyperNode tier, those tiers sharing their trees
    (so any two nest one in the other), else one over the group."""
    levels = frozenset(k for k in keys if k != NODE_LEVEL)
    if not levels:
        return []
    book = _book(store)
    if levels not in book.wanted:
        groups = level_groups(levels, store.nodes)
        book.wanted[levels] = [h for g in groups for h in _forest(store, book, g)]
    return book.wanted[levels]


def _forest(store: LevelStore, book: _Book, levels: frozenset[str]) -> list[HyperNode]:
    trees: set[frozenset[int]] = set()
    ix = store.index
    for k in sorted(levels):
        if k not in book.real:
            book.real[k] = _real(store, k)
        name = book.real[k]
        if name is None:
            trees = set()
            break
        trees.add(frozenset(int(ix.tree_of[h]) for h in ix.by_tier_name(name)))
    if len(trees) == 1:
        return []
    real = [h for h in store.hypernodes.values() if SYNTHETIC_ANNOTATION not in h.meta.annotations]
    return label_forest(levels, store.nodes, real)


def _nested(store: LevelStore, outer: str, inner: str) -> bool:
    """Whether every domain of tier ``inner`` lies inside one of tier ``outer``."""
    ix = store.index
    above = set(ix.by_tier_name(outer))
    return all(any(a in above for a in ix.ancestors(h)[1:]) for h in ix.by_tier_name(inner))


@dataclass(frozen=True, slots=True)
class Resolved:
    """A gang's levels as tiers (``NODE`` for the node level)."""

    tiers: dict[str, str]


def _pairs(chains: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """Each (outer, inner) pair of different levels a gang nests, in order."""
    out: list[tuple[str, str]] = []
    for chain in chains:
        keys = [k for k in chain if k != NODE_LEVEL]
        out.extend((a, b) for a, b in itertools.pairwise(keys) if a != b)
    return out


def resolve_levels(store: LevelStore, chains: Sequence[Sequence[str]]) -> Resolved | str:
    """The tiers a gang's levels stand for; ``chains``: per PodSet, its levels outer
    first (its own, then its slice layers'). Why not, as a reason, when they cannot."""
    for chain in chains:
        if NODE_LEVEL in chain and chain[-1] != NODE_LEVEL:
            inner = next(k for k in chain[chain.index(NODE_LEVEL) :] if k != NODE_LEVEL)
            return f"level {inner!r} is above the node level ({NODE_LEVEL}) that holds it"
    keys = sorted({k for c in chains for k in c if k != NODE_LEVEL})
    tiers: dict[str, str] = dict.fromkeys((k for c in chains for k in c if k == NODE_LEVEL), NODE)
    if not keys:
        return Resolved(tiers)
    book = _book(store)
    for k in keys:
        if k not in book.real:
            book.real[k] = _real(store, k)
    pairs = _pairs(chains)
    real = {k: book.real[k] for k in keys}
    if all(t is not None for t in real.values()):
        ok = True
        for a, b in pairs:
            ta, tb = real[a], real[b]
            assert ta is not None and tb is not None
            if (ta, tb) not in book.nests:
                book.nests[ta, tb] = ta != tb and _nested(store, ta, tb)
            ok = ok and book.nests[ta, tb]
        if ok:
            return Resolved({**tiers, **{k: t for k, t in real.items() if t is not None}})
        if not book.forest:
            a, b = next((a, b) for a, b in pairs if not book.nests[real[a] or "", real[b] or ""])
            return (
                f"level {b!r} (tier {real[b]}) does not lie inside level {a!r} (tier "
                f"{real[a]}) in the HyperNodes"
            )
    missing = [k for k in keys if k not in book.forest]
    if missing:
        return _unresolved(store, missing[0])
    order = book.order
    for a, b in pairs:
        if order.index(a) > order.index(b):
            return (
                f"level {b!r} is above level {a!r} on these nodes (fewer label values), "
                f"so {b!r} cannot be inside {a!r}"
            )
    return Resolved({**tiers, **{k: book.forest[k] for k in keys}})


def _unresolved(store: LevelStore, key: str) -> str:
    if not any(key in n.labels for n in store.nodes):
        return f"level {key!r} is a label no node carries"
    return (
        f"level {key!r} has no domains yet: no HyperNode tree stands for its label values "
        "and the nodes' label forest does not hold it (the scheduler makes it when it "
        "reads the pods)"
    )
