"""Kueue's levels from the nodes' labels, where no HyperNode tree stands for them.

Kueue's Topology is a list of node-label keys, top first; a domain of level i is the
nodes sharing the values of levels 0..i (``pkg/cache/scheduler/tas_flavor_snapshot.go``
at v0.19.2: a domain's ID is its level values joined, so rack ``r1`` of block ``b1`` and
rack ``r1`` of block ``b2`` are two domains), and ``kubernetes.io/hostname``, the last
level where a Topology has it, is the node itself. tierra has no Topology object: pods
name their levels, and a level resolves to a tier of the HyperNodes (label discovery's,
or any tree whose domains coincide with the label's values: ``constraints.kueue_levels``).
Where a level has no such tier, the nodes' labels are the topology: this module makes
one forest over the levels the pods name that share nodes (``label_forest``), as Kueue
would over a Topology with those levels; levels on disjoint sets of nodes (two node
groups labelled differently, as Kueue's flavors each have their own Topology) are apart
(``level_groups``), so one group's labels never hide the other's nodes:

* levels ordered top first by how many values they take (fewer first, then by key), so
  ``block`` sits above ``rack``; a gang naming them in the other order waits with a reason;
* one HyperNode per path of values, the lowest tier selecting its nodes by ``labelMatch``
  on every level's value (a relabelled node moves with its labels), each tier named for
  its key (``<key> (node labels)`` where a HyperNode of the input already uses that name);
* nodes that lack one of the levels are in none of it, as Kueue leaves a node without its
  Topology's labels out of the flavor;
* the hostname level is never built: it is the node (``NODE_LEVEL``).

The forest is marked ``SYNTHETIC_ANNOTATION`` (never written to the cluster) and
``FOREST_ANNOTATION`` (its levels, top first), so the scheduler finds each level's tier.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from tierra.api.hypernode import TIERRA_GROUP, HyperNode, Member, MemberSelector, MemberType
from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node

NODE_LEVEL = "kubernetes.io/hostname"  # Kueue's node level (corev1.LabelHostname)
FOREST_ANNOTATION = "topology.tierra.dev/kueue-levels"
SYNTHETIC = "topology.tierra.dev/from-node-label"  # api.workload.SYNTHETIC_ANNOTATION too
NAMED_SUFFIX = " (node labels)"


def _dns_part(text: str, most: int) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[:most].strip("-") or "x"


def ordered_levels(keys: Iterable[str], nodes: Iterable[Node]) -> list[str]:
    """The levels top first: fewer distinct values first, then by key."""
    values: dict[str, set[str]] = {k: set() for k in keys}
    for node in nodes:
        for k, seen in values.items():
            v = node.labels.get(k)
            if v is not None:
                seen.add(v)
    return sorted(values, key=lambda k: (len(values[k]), k))


def tier_names(levels: Sequence[str], taken: Iterable[str]) -> dict[str, str]:
    """Each level's tier name in the forest: its key, unless another HyperNode has it."""
    used = set(taken)
    return {k: k + NAMED_SUFFIX if k in used else k for k in levels}


def label_forest(
    keys: Iterable[str], nodes: Sequence[Node], hypernodes: Iterable[HyperNode]
) -> list[HyperNode]:
    """The HyperNodes Kueue's levels ``keys`` make of ``nodes`` (the module docstring);
    ``hypernodes``: the input's own, whose tier names the forest's must not take."""
    levels = ordered_levels((k for k in keys if k != NODE_LEVEL), nodes)
    if not levels:
        return []
    names = tier_names(levels, (h.tier_name for h in hypernodes if h.tier_name))
    paths = sorted(
        {tuple(n.labels[k] for k in levels) for n in nodes if all(k in n.labels for k in levels)}
    )
    marker = ",".join(levels)
    depth = len(levels)
    made: dict[tuple[str, ...], HyperNode] = {}
    for path in paths:
        for i in range(depth, 0, -1):
            prefix = path[:i]
            if prefix in made:
                break
            made[prefix] = _domain(levels, names, prefix, marker, depth)
    kids: dict[tuple[str, ...], list[str]] = {}
    for prefix, hn in made.items():
        if len(prefix) > 1:
            kids.setdefault(prefix[:-1], []).append(hn.meta.name)
    out = [
        hn
        if len(prefix) == depth
        else replace(
            hn,
            members=tuple(
                Member(MemberType.HYPERNODE, MemberSelector(exact=name))
                for name in sorted(kids[prefix])
            ),
        )
        for prefix, hn in made.items()
    ]
    return sorted(out, key=lambda h: h.meta.name)


def _domain(
    levels: Sequence[str],
    names: Mapping[str, str],
    prefix: tuple[str, ...],
    marker: str,
    depth: int,
) -> HyperNode:
    """The forest's HyperNode of one path of values (nodes by label at the lowest tier)."""
    key = levels[len(prefix) - 1]
    value = prefix[-1]
    whole = "\n".join(f"{k}={v}" for k, v in zip(levels, prefix, strict=False))
    digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
    # at most 6 + 20 + 1 + 24 + 1 + 8 = 60 characters: a qualified name, as exactMatch wants
    name = f"kueue-{_dns_part(key.rsplit('/', 1)[-1], 20)}-{_dns_part(value, 24)}-{digest}"
    members: tuple[Member, ...] = ()
    if len(prefix) == depth:
        match = dict(zip(levels, prefix, strict=True))
        members = (Member(MemberType.NODE, MemberSelector(labels=LabelSelector(match))),)
    return HyperNode(
        meta=ObjectMeta(
            name=name, annotations={SYNTHETIC: f"{key}={value}", FOREST_ANNOTATION: marker}
        ),
        tier=depth - len(prefix) + 1,
        tier_name=names[key],
        members=members,
        group=TIERRA_GROUP,
    )


def forest_tiers(hypernodes: Iterable[HyperNode]) -> dict[str, str]:
    """Level key -> the forest's tier name for it, read off the forest's HyperNodes."""
    out: dict[str, str] = {}
    for hn in hypernodes:
        ann = hn.meta.annotations
        if FOREST_ANNOTATION in ann and hn.tier_name is not None:
            key = ann.get(SYNTHETIC, "").split("=", 1)[0]
            out.setdefault(key, hn.tier_name)
    return out


def forest_levels(hypernodes: Iterable[HyperNode]) -> tuple[str, ...]:
    """The forests' levels, each forest's top first, the forests in marker order (empty
    when there is no forest): only levels of one forest are ever compared."""
    markers = {hn.meta.annotations.get(FOREST_ANNOTATION) for hn in hypernodes}
    return tuple(k for m in sorted(x for x in markers if x) for k in m.split(","))


def level_groups(keys: Iterable[str], nodes: Iterable[Node]) -> list[frozenset[str]]:
    """``keys`` grouped by the nodes carrying them: two levels are in one group when a
    node carries both, or through a chain of such levels; a level no node carries is a
    group of its own. Sorted, for a deterministic forest."""
    parent = {k: k for k in keys}

    def root(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for node in nodes:
        carried = sorted(k for k in parent if k in node.labels)
        for k in carried[1:]:
            parent[root(k)] = root(carried[0])
    groups: dict[str, set[str]] = {}
    for k in parent:
        groups.setdefault(root(k), set()).add(k)
    return sorted((frozenset(g) for g in groups.values()), key=sorted)
