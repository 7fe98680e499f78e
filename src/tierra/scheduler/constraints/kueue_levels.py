"""Kueue's topology annotations as a gang's shape: levels, slices, PodSet groups, ranks.

A gang's pods fall into PodSets by the ``kueue.x-k8s.io/podset`` label (one PodSet when
none carries it); each PodSet's request is read from its pods' annotations
(``tierra.api.kueue``). A level is a node-label key; the gang's levels become tiers
together (``kueue_resolve``): ``kubernetes.io/hostname`` is the node itself, another
level the tier of the HyperNodes that stand for its label values, else the tier of the
forest the nodes' label values make. Then, as Kueue's ``findTopologyAssignment`` reads a
request:

* ``required: L``: every pod of the PodSet in one domain of level L (hard, tier of L;
  at the node level: on one node);
* ``preferred: L``: the lowest domain that fits from level L up, else spread (soft, with
  L as the preferred tier: pods packed into as few L domains as possible);
* ``unconstrained``: capacity only (no topology);
* slices ``(L, S)``: the PodSet in groups of S pods, each group one sub-group required in
  one domain of L, inside the PodSet's own level; groups are cut in rank order, so group
  k holds ranks ``[kS, (k+1)S)`` as Kueue's rank-ordered slots do; inner layers of the
  multi-layer form are checked when the gang is reserved (``slices.InnerSlices``);
* ``podset-group-name``: the two PodSets of a group (leader and workers) are one unit
  under their shared level.

Groups at the node level (a PodSet required on a host, slices of hosts) are
``KueueShape.hosts``: each node holds a multiple of the group's size of its pods
(``slices.InnerSlices`` caps the nodes so and checks it at reserve); a sub-group at the
node level has a soft limit inside its gang's domain, so the search keeps it in the gang's
domain and the caps put it on one node.

The gang's level is its one leveled PodSet's (or PodSet group's), or the level sliced
PodSets share; PodSets that each ask for a level of their own (the same or not) become
sub-groups of their own, each in one domain of its level, as Kueue places PodSets. A
Volcano ``networkTopology`` on the PodGroup wins as the gang's limit and Kueue's levels
narrow inside it (a sub-group's limit never exceeds its gang's). What cannot be honoured
is a gang problem (a pending reason), never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tierra.api import kueue
from tierra.api.kueue import PodSetTopology
from tierra.api.kueue_pod_group import podset_of
from tierra.api.natural import natural_key
from tierra.api.pod import Pod
from tierra.api.podgroup import LimitWords, NetworkTopology, PodGroup, TopologyMode
from tierra.api.tierra_annotations import (
    RANK_LABEL,
    SLICES,
    GangTopology,
    Layer,
    read_gang_topology,
)
from tierra.scheduler.constraints.kueue_resolve import NODE, resolve_levels

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore

NODE_TEXT = "the node level (kubernetes.io/hostname)"


@dataclass(frozen=True, slots=True)
class Part:
    """Pods placed as one block (a slice, or a PodSet with its own level)."""

    id: str
    pods: tuple[Pod, ...]  # in rank order
    size: int
    topology: NetworkTopology | None
    tier: str | None = None  # a slice's tier name (``NODE``: the node level)


@dataclass(frozen=True, slots=True)
class Nest:
    """One slice layer resolved: groups of ``size`` pods, each in one domain of a tier
    (by name or by number); ``said`` names the layer as its annotation wrote it."""

    size: int
    tier_name: str | None
    tier: int | None
    said: str

    @property
    def node(self) -> bool:
        return self.tier_name == NODE

    @property
    def topology(self) -> NetworkTopology:
        words = LimitWords(limit=self.said)
        if self.tier is not None:
            return NetworkTopology(
                mode=TopologyMode.HARD, highest_tier_allowed=self.tier, words=words
            )
        if self.node:  # inside the gang's domain; the hosts' caps keep it on one node
            return NetworkTopology(mode=TopologyMode.SOFT, words=words)
        return NetworkTopology(
            mode=TopologyMode.HARD, highest_tier_name=self.tier_name, words=words
        )

    @property
    def text(self) -> str:
        if self.node:
            return NODE_TEXT
        return f"tier {self.tier}" if self.tier is not None else f"tier {self.tier_name}"


@dataclass(frozen=True, slots=True)
class KueueShape:
    """What Kueue's annotations make of one gang."""

    topology: NetworkTopology | None  # the gang's own limit
    parts: tuple[Part, ...]
    loose: tuple[Pod, ...]  # pods under the gang's limit only
    ranks: Mapping[str, tuple[str, int]]  # pod key -> (rank space, rank)
    inner: Mapping[str, tuple[Nest, ...]]  # PodSet -> its inner layers, checked at reserve
    # pod key -> (group, size): every node holds a multiple of size of the group's pods
    hosts: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    preferred: str | None = None  # the gang's preferred level's tier (``NODE``), if any
    leaders: frozenset[str] = frozenset()  # pods of a PodSet group's leader PodSet


def _topology(req: PodSetTopology, tier: str | None) -> NetworkTopology | None:
    """A PodSet's own level as a limit, worded as its annotation (whatever the PodGroup's
    API: the level was written on the pods, in Kueue's terms). At the node level: soft,
    the hosts' caps do the rest for a required one; a preferred one is placed on one node
    where one holds it."""
    if tier == NODE and (req.required is not None or req.preferred is not None):
        return NetworkTopology(mode=TopologyMode.SOFT)
    if req.required is not None:
        words = LimitWords(
            limit=f"{kueue.REQUIRED} {req.required}",
            wider=f"{kueue.REQUIRED}: {{}}",
            whole=f"{kueue.PREFERRED} instead",
        )
        return NetworkTopology(mode=TopologyMode.HARD, highest_tier_name=tier, words=words)
    if req.preferred is not None:
        words = LimitWords(limit=f"{kueue.PREFERRED} {req.preferred}")
        return NetworkTopology(mode=TopologyMode.SOFT, preferred_tier_name=tier, words=words)
    return None


def _resolved(
    store: ClusterStore, chains: Mapping[str, tuple[str, ...]], where: str
) -> dict[str, str] | str:
    """The tiers of every chain's levels (``kueue_resolve``), or the first problem, worded
    for the first chain (in order) that has it."""
    got = resolve_levels(store, list(chains.values()))
    if not isinstance(got, str):
        return got.tiers
    for name, chain in sorted(chains.items()):
        alone = resolve_levels(store, [chain])
        if isinstance(alone, str):
            return f"{where.format(name)}: {alone}"
    return got


def _kueue_nests(req: PodSetTopology, tiers: Mapping[str, str]) -> tuple[Nest, ...]:
    """A PodSet's slice layers, each named as Kueue's annotation that asked for it."""
    if len(req.slices) == 1:
        (s,) = req.slices
        return (Nest(s.size, tiers[s.level], None, f"{kueue.SLICE_REQUIRED} {s.level}"),)
    return tuple(
        Nest(s.size, tiers[s.level], None, f"{kueue.SLICE_LAYERS}[{i}] level {s.level}")
        for i, s in enumerate(req.slices)
    )


def _requests(pods: Sequence[Pod]) -> tuple[dict[str, PodSetTopology | None], str | None]:
    """Each PodSet's request (pods of one PodSet must agree), or the first problem."""
    out: dict[str, PodSetTopology | None] = {}
    for pod in pods:
        req, problems = kueue.read_topology(pod.meta.annotations)
        if problems:
            key, message = problems[0]
            return {}, f"pod {pod.key}: metadata.annotations[{key}]: {message}"
        ps = podset_of(pod)
        if ps in out and out[ps] != req:
            return (
                {},
                f"pod {pod.key}: PodSet {ps}'s pods carry different Kueue topology annotations",
            )
        out[ps] = req
    return out, None


def _ranked(pods: Sequence[Pod], offset: int, bound: int) -> tuple[list[Pod], list[int] | None]:
    ordered = sorted(pods, key=lambda p: natural_key(p.name))
    inputs = [kueue.rank_inputs(p.meta.labels, p.meta.annotations) for p in ordered]
    got = kueue.ranks(inputs, offset, bound)
    if got is None:
        return ordered, None
    pairs = sorted(zip(got, ordered, strict=True), key=lambda rp: rp[0])
    return [p for _, p in pairs], [r for r, _ in pairs]


def _groups(
    reqs: Mapping[str, PodSetTopology | None], by_ps: Mapping[str, list[Pod]]
) -> tuple[dict[str, list[str]], str | None]:
    """Rank spaces: a PodSet group's two PodSets (leader first), or one PodSet each."""
    named: dict[str, list[str]] = {}
    for ps in sorted(by_ps):
        req = reqs.get(ps)
        if req is not None and req.group is not None:
            named.setdefault(req.group, []).append(ps)
    spaces: dict[str, list[str]] = {}
    for name, members in named.items():
        where = f"metadata.annotations[{kueue.GROUP_NAME}] {name!r}"
        if len(members) != 2:
            return (
                {},
                f"{where}: can only group exactly 2 PodSets, got {len(members)} "
                f"({', '.join(members)})",
            )
        a, b = sorted(members, key=lambda ps: len(by_ps[ps]))
        if len(by_ps[a]) != 1:
            return (
                {},
                f"{where}: one PodSet of a group must have 1 pod "
                f"(got {len(by_ps[a])} and {len(by_ps[b])})",
            )
        ra, rb = reqs[a], reqs[b]
        assert ra is not None and rb is not None
        if (ra.required, ra.preferred) != (rb.required, rb.preferred):
            return (
                {},
                f"{where}: PodSets {a} and {b} must name the same required or preferred level",
            )
        spaces["group:" + name] = [a, b]
    grouped = {ps for members in spaces.values() for ps in members}
    for ps in sorted(by_ps):
        if ps not in grouped:
            spaces["podset:" + ps] = [ps]
    return spaces, None


def _pod_annotated(pods: Sequence[Pod]) -> bool:
    """Whether any pod carries a Kueue topology request (a plain loop: once per gang built,
    on every gang, so no generator)."""
    keys = kueue.ANNOTATED
    for p in pods:  # noqa: SIM110
        if not keys.isdisjoint(p.meta.annotations):
            return True
    return False


def kueue_shape(
    store: ClusterStore, pg: PodGroup | None, pods: Sequence[Pod]
) -> KueueShape | str | None:
    """The gang ``pods`` make under Kueue's pod annotations or the PodGroup's tierra ones
    (``tierra.api.tierra_annotations``), why it cannot be, or None when there are none."""
    mine = read_gang_topology(pg.meta.annotations)[0] if pg is not None else None
    nested = mine is not None and bool(mine.slices or mine.rank_label)
    if not _pod_annotated(pods):
        if mine is None or not nested or pg is None:
            return None
        return tierra_shape(store, pg, pods, mine)
    if nested:
        return (
            f"the PodGroup's {SLICES} or {RANK_LABEL} and its pods' Kueue topology "
            "annotations both shape the gang; use one of them"
        )
    reqs, problem = _requests(pods)
    if problem is not None:
        return problem
    by_ps: dict[str, list[Pod]] = {}
    for p in pods:
        by_ps.setdefault(podset_of(p), []).append(p)
    spaces, problem = _groups(reqs, by_ps)
    if problem is not None:
        return problem
    chains = {ps: req.levels() for ps, req in reqs.items() if req is not None}
    tiers = _resolved(store, chains, "PodSet {}")
    if isinstance(tiers, str):
        return tiers
    nests = {
        ps: _kueue_nests(req, tiers) for ps, req in reqs.items() if req is not None and req.slices
    }
    return _shape(pg, reqs=reqs, by_ps=by_ps, spaces=spaces, tiers=tiers, nests=nests)


def _resolve_layer(
    store: ClusterStore, layer: Layer, i: int, tiers: Mapping[str, str]
) -> Nest | str:
    where = f"metadata.annotations[{SLICES}][{i}]"
    said = f"{SLICES}[{i}] {layer.text}"
    if layer.tier is not None:
        return Nest(layer.size, None, layer.tier, said)
    if layer.tier_name is not None:
        if not store.index.by_tier_name(layer.tier_name):
            return f"{where}: tierName {layer.tier_name!r} names no tier of a usable HyperNode"
        return Nest(layer.size, layer.tier_name, None, said)
    assert layer.level is not None
    return Nest(layer.size, tiers[layer.level], None, said)


def tierra_shape(
    store: ClusterStore, pg: PodGroup, pods: Sequence[Pod], mine: GangTopology
) -> KueueShape | str:
    """The gang a PodGroup's ``slices`` and ``rank-label`` annotations describe: one
    PodSet, its rank from the named label, its layers as Kueue's multi-layer slices."""
    where = f"metadata.annotations[{SLICES}]"
    levels = tuple(layer.level for layer in mine.slices if layer.level is not None)
    tiers = _resolved(store, {"": levels}, where) if levels else {}
    if isinstance(tiers, str):
        return tiers
    nests: list[Nest] = []
    for i, layer in enumerate(mine.slices):
        nest = _resolve_layer(store, layer, i, tiers)
        if isinstance(nest, str):
            return nest
        nests.append(nest)
    ordered = sorted(pods, key=lambda p: natural_key(p.name))
    ranks: dict[str, tuple[str, int]] = {}
    if mine.rank_label is not None:
        label = mine.rank_label
        got = [p.meta.labels.get(label, "") for p in ordered]
        values = [int(v) for v in got if v.isascii() and v.isdigit()]
        if len(values) == len(ordered) and sorted(values) == list(range(len(ordered))):
            pairs = sorted(zip(values, ordered, strict=True), key=lambda rp: rp[0])
            ordered = [p for _, p in pairs]
            ranks = {p.key: ("gang", r) for r, p in pairs}
    if not nests:
        return KueueShape(pg.network_topology, (), tuple(ordered), ranks, {})
    sliced = _sliced("gang", ordered, tuple(nests), pg.network_topology, single=True)
    if isinstance(sliced, str):
        return sliced
    gang_topology, parts, inner = sliced
    host = max((n.size for n in nests if n.node), default=1)
    hosts = {p.key: ("gang", host) for p in ordered} if host > 1 else {}
    inner = tuple(n for n in inner if not n.node)
    return KueueShape(
        gang_topology, tuple(parts), (), ranks, {"gang": inner} if inner else {}, hosts
    )


def _space_level(
    reqs: Mapping[str, PodSetTopology | None], members: Sequence[str]
) -> PodSetTopology | None:
    req = reqs.get(members[-1])
    return req if req is not None and (req.level or req.unconstrained or req.slices) else None


def _ordered(
    spaces: Mapping[str, list[str]], by_ps: Mapping[str, list[Pod]]
) -> tuple[dict[str, list[Pod]], dict[str, tuple[str, int]]]:
    """Each PodSet's pods in rank order, and the ranks (a group's leader first)."""
    ordered_of: dict[str, list[Pod]] = {}
    ranks: dict[str, tuple[str, int]] = {}
    for space, members in sorted(spaces.items()):
        total = sum(len(by_ps[ps]) for ps in members)
        offset = 0
        for ps in members:
            ordered, got = _ranked(by_ps[ps], offset, total)
            if got is not None:  # ranks within the PodSet: the space's start after the leader's
                ranks.update(
                    (p.key, (space, offset + r)) for p, r in zip(ordered, got, strict=True)
                )
            ordered_of[ps] = ordered
            offset += len(ordered)
    return ordered_of, ranks


def _shape(
    pg: PodGroup | None,
    *,
    reqs: Mapping[str, PodSetTopology | None],
    by_ps: Mapping[str, list[Pod]],
    spaces: Mapping[str, list[str]],
    tiers: Mapping[str, str],
    nests: Mapping[str, tuple[Nest, ...]],
) -> KueueShape | str:
    leveled = [r for m in spaces.values() if (r := _space_level(reqs, m))]
    levels = {(r.required, r.preferred) for r in leveled}
    own = pg.network_topology if pg is not None else None
    shared: NetworkTopology | None = None
    # one level for the whole gang when one rank space has it, or when PodSets are
    # sliced (the outer level then frames the slices); PodSets that each ask for the same
    # level on their own are placed each in a domain of it, as Kueue places PodSets
    # (jobset_test "should admit a JobSet with two ReplicatedJobs": two hosts, not one)
    preferred: str | None = None
    if own is None and len(levels) == 1 and (len(leveled) == 1 or nests):
        first = next(r for m in spaces.values() if (r := _space_level(reqs, m)))
        shared = _topology(first, tiers.get(first.level or ""))
        preferred = tiers.get(first.preferred) if first.preferred else None
    gang_topology = own if own is not None else shared
    ordered_of, ranks = _ordered(spaces, by_ps)
    parts: list[Part] = []
    loose: list[Pod] = []
    inner: dict[str, tuple[Nest, ...]] = {}
    for space, members in sorted(spaces.items()):
        group = _space_level(reqs, members) if len(members) == 2 else None
        if group is not None and shared is None:  # leader and workers: one unit
            unit = tuple(p for ps in members for p in ordered_of[ps])
            topo = _topology(group, tiers[group.level or ""])
            parts.append(Part(f"kueue-{space}", unit, len(unit), topo))
            continue
        for ps in members:
            ordered, req = ordered_of[ps], reqs.get(ps)
            if req is not None and ps in nests:
                if req.level and gang_topology is None:
                    return (
                        f"PodSet {ps}: a sliced PodSet's own level {req.level!r} must be the "
                        "gang's (PodSets of one gang with slices and different levels are "
                        "not supported)"
                    )
                sliced = _sliced(ps, ordered, nests[ps], gang_topology, single=len(spaces) == 1)
                if isinstance(sliced, str):
                    return sliced
                gang_topology, more, layers = sliced
                parts.extend(more)
                layers = tuple(n for n in layers if not n.node)  # the hosts' caps check those
                if layers:
                    inner[ps] = layers
            elif req is not None and req.level and shared is None:
                topo = _topology(req, tiers[req.level])
                parts.append(Part(f"kueue-{space}", tuple(ordered), len(ordered), topo))
            else:
                loose.extend(ordered)
    leaders = frozenset(p.key for m in spaces.values() if len(m) == 2 for p in ordered_of[m[0]])
    return KueueShape(
        gang_topology,
        tuple(parts),
        tuple(loose),
        ranks,
        inner,
        _hosts(reqs, spaces, ordered_of, tiers, nests),
        preferred,
        leaders,
    )


def _hosts(
    reqs: Mapping[str, PodSetTopology | None],
    spaces: Mapping[str, list[str]],
    ordered_of: Mapping[str, list[Pod]],
    tiers: Mapping[str, str],
    nests: Mapping[str, tuple[Nest, ...]],
) -> dict[str, tuple[str, int]]:
    """Pods in groups at the node level, each with its group and the group's size: a
    unit or PodSet required on a host (all of it), or slices of hosts (each slice); the
    larger group where both apply."""
    out: dict[str, tuple[str, int]] = {}

    def put(pods: Sequence[Pod], group: str, size: int) -> None:
        for p in pods:
            if size > out.get(p.key, ("", 1))[1]:
                out[p.key] = (group, size)

    for space, members in spaces.items():
        req = _space_level(reqs, members)
        if req is not None and req.required is not None and tiers.get(req.required) == NODE:
            unit = [p for ps in members for p in ordered_of[ps]]
            put(unit, space, len(unit))
        for ps in members:
            for nest in nests.get(ps, ()):
                if nest.node:
                    put(ordered_of[ps], ps, nest.size)
    return out


def _outer_limit(nest: Nest, own: NetworkTopology | None) -> NetworkTopology:
    """The gang's limit when its pods make one outer slice: the outer layer's, or the
    gang's own where both are tiers by number and the gang's is tighter."""
    if own is not None and own.mode is TopologyMode.HARD and nest.tier is not None:
        k = own.highest_tier_allowed
        if k is not None and k < nest.tier:
            return own
    return nest.topology


def _sliced(
    ps: str,
    ordered: Sequence[Pod],
    nests: tuple[Nest, ...],
    gang_topology: NetworkTopology | None,
    *,
    single: bool,
) -> tuple[NetworkTopology | None, list[Part], tuple[Nest, ...]] | str:
    """A PodSet cut into its outer slices (sub-groups), the gang's limit, and the inner
    layers left to check. With a single outer slice, the outer layer is the gang's limit
    and the next layer makes the sub-groups, so the search itself keeps them together."""
    count = len(ordered)
    where = f"PodSet {ps}" if ps != "gang" else "the gang"
    outer = nests[0]
    if outer.size > count:
        return f"{where}: slice size {outer.size} must not be greater than its {count} pods"
    if count % outer.size:
        return f"{where}: its {count} pods do not divide into slices of {outer.size}"
    layer = 0
    if len(nests) > 1 and count == outer.size and single:
        gang_topology = _outer_limit(outer, gang_topology)
        layer = 1
    cut = nests[layer]
    parts = [
        Part(
            f"kueue-{ps}-slice-{i}",
            tuple(ordered[i * cut.size : (i + 1) * cut.size]),
            cut.size,
            cut.topology,
            cut.tier_name,
        )
        for i in range(count // cut.size)
    ]
    return gang_topology, parts, nests[layer + 1 :]
