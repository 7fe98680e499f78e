"""Inner slice layers: Kueue's multi-layer slices below the outer one.

``podset-slice-required-topology-constraints`` lists up to three layers, outer first.
The outer layer cuts the PodSet into sub-groups, each required in one domain of its
level (``kueue_levels``); each inner layer asks that, inside, pods come in groups of its
size within one domain of its level -- with slots filled in rank order, that is every
domain of the inner level holding a multiple of the inner size of the PodSet's pods
(Kueue's ``buildSliceSizeAtLevel`` distributes in multiples of the inner size at every
level down to it). ``reserve`` checks it once the gang is placed and refuses otherwise,
so the next candidate domain is tried and the reason names the layer.

The node level (``kubernetes.io/hostname``) is the same rule with the node as the
domain, for every group ``KueueShape.hosts`` lists (a PodSet or unit required on a host,
slices of hosts): each node holds a multiple of the group's size of its pods. Kueue
counts slices per host (``fillInCountsHelper``: a host holds ``pods // size`` slices), and
so do the per-node caps here (``node_caps``: each node may take a multiple of the size,
``(room // size) * size``), so the search counts only whole groups and node choice puts
a slice on one node; ``reserve`` checks it as for the other layers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.kueue_pod_group import podset_of
from tierra.api.pod import Pod
from tierra.scheduler.constraints.balanced import balancing
from tierra.scheduler.constraints.kueue_levels import Nest
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.gang import Gang
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import TopologyIndex


def _at(ix: TopologyIndex, h: int, layer: Nest) -> bool:
    if layer.tier is not None:
        return int(ix.tier[h]) == layer.tier
    return ix.hypernodes[h].tier_name == layer.tier_name


def _host_group(gang: Gang, shape: Shape) -> tuple[str, int] | None:
    """The node-level group every pod of ``shape`` is in, with its size: ``("", size)``
    when they share only the size (several groups), None when they share nothing."""
    hosts = gang.kueue.hosts if gang.kueue is not None else {}
    found = {hosts.get(p.key, ("", 1)) for p in shape.pods}
    if len(found) == 1:
        return found.pop()
    sizes = {size for _, size in found}
    return ("", sizes.pop()) if len(sizes) == 1 else None


def _progress(cycle: Cycle, gang: Gang, group: str) -> tuple[int, list[int]]:
    """The group's pods this attempt placed, and the nodes holding its pods (this
    attempt's, latest first, then its running ones)."""
    assert gang.kueue is not None
    hosts, mine = gang.kueue.hosts, {p.key for p in gang.pending}
    placed, used = 0, []
    assigned = cycle.overlay.assigned
    for i in range(len(assigned) - 1, -1, -1):  # the gang's own pods are the latest
        pod, node, _ = assigned[i]
        if pod.key not in mine:
            break
        if hosts.get(pod.key, ("", 1))[0] == group:
            placed += 1
            used.append(node)
    node_of = cycle.store.node_of
    used += [node_of[p.key] for p in gang.running if p.key in node_of and p.key in hosts]
    return placed, used


def _pick(nodes: IntArray, slots: IntArray, room: IntArray, used: list[int], left: int) -> int:
    """Where the next slice goes (a position in ``nodes``, -1: none), as Kueue's greedy
    hands out slices over hosts: a host the group already uses while it has room, else
    the host with the most slices (then the fewest pods, then the name), or -- where
    one holds every slice left -- the first with the fewest slices that still does."""
    at = {int(n): i for i, n in enumerate(nodes.tolist())}
    for n in used:
        i = at.get(n)
        if i is not None and slots[i] > 0:
            return i
    order = np.lexsort((nodes, room, -slots))
    if len(order) == 0 or slots[order[0]] <= 0:
        return -1
    if slots[order[0]] < left:
        return int(order[0])
    fits = order[slots[order] >= left]
    return int(fits[np.argmin(slots[fits])])  # the first of the fewest


def _host_caps(cycle: Cycle, gang: Gang, shape: Shape, nodes: IntArray) -> IntArray | None:
    """Per-node caps for a shape at the node level (``InnerSlices.node_caps``)."""
    found = _host_group(gang, shape)
    if found is None or found[1] <= 1:
        return None
    group, size = found
    room = cycle.store.capacity.fit_counts(shape.vec, shape.eligibility.mask, nodes)
    slots = room // size
    if not group or len(shape.pods) != size or balancing(cycle, gang):
        return slots * size  # whole groups only (a balanced plan says where each goes)
    placed, used = _progress(cycle, gang, group)
    total = sum(1 for p in gang.pending if gang.kueue and gang.kueue.hosts.get(p.key) == found)
    i = _pick(nodes, slots, room, used, max(1, (total - placed) // size))
    caps = np.zeros(len(nodes), dtype=np.int64)
    if i >= 0:
        caps[i] = size
    return caps


def _host_refusal(cycle: Cycle, gang: Gang, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
    """A node holding part of a node-level group (the first, by group then node)."""
    assert gang.kueue is not None
    hosts, store = gang.kueue.hosts, cycle.store
    on: Counter[tuple[str, int]] = Counter()
    for p in gang.running:
        if p.key in hosts and p.key in store.node_of:
            on[hosts[p.key][0], store.node_of[p.key]] += 1
    for p, n in placed:
        if p.key in hosts:
            on[hosts[p.key][0], n] += 1
    size = dict(hosts.values())
    bad = sorted((g, n) for (g, n), c in on.items() if c % size[g])
    if not bad:
        return None
    group, node = bad[0]
    values = (
        ("podset", group),
        ("level", "the node level (kubernetes.io/hostname)"),
        ("size", size[group]),
        ("domain", store.index.node_names[node]),
        ("pods", on[group, node]),
    )
    return Refusal(InnerSlices(), "inner slice", len(bad), values)


@dataclass(frozen=True, slots=True)
class InnerSlices(Constraint):
    """Refuses a placement whose inner-layer domains hold a partial group; caps nodes to
    whole node-level groups."""

    name = "kueue-inner-slices"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # reserves for Kueue's slices only: a lone pod has none

    def applies(self, cycle: Cycle) -> bool:
        gang = cycle.gang
        return gang is None or gang.kueue is not None  # Kueue's annotations made one

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        gang = cycle.gang
        if gang is None or gang.kueue is None or not gang.kueue.hosts:
            return None
        return _host_caps(cycle, gang, shape, nodes)

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "host groups", capped)

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        gang = cycle.gang
        shape = gang.kueue if gang is not None else None
        if shape is None or gang is None:
            return None
        if shape.hosts:
            refused = _host_refusal(cycle, gang, placed)
            if refused is not None:
                return refused
        if not shape.inner:
            return None
        store, ix = cycle.store, cycle.store.index
        of = (lambda _: "gang") if "gang" in shape.inner else podset_of
        on: dict[str, list[int]] = {}
        for p in gang.running:
            if p.key in store.node_of:
                on.setdefault(of(p), []).append(store.node_of[p.key])
        for p, n in placed:
            on.setdefault(of(p), []).append(n)
        for ps, layers in sorted(shape.inner.items()):
            for layer in layers:
                counts: Counter[int] = Counter()
                for n in on.get(ps, ()):
                    for d in ix.domains_of(n):
                        h = int(d)
                        if h != ix.root and _at(ix, h, layer):
                            counts[h] += 1
                bad = sorted(h for h, c in counts.items() if c % layer.size)
                if bad:
                    values = (
                        ("podset", ps),
                        ("level", layer.text),
                        ("size", layer.size),
                        ("domain", ix.names[bad[0]]),
                        ("pods", counts[bad[0]]),
                    )
                    return Refusal(self, "inner slice", len(bad), values)
        return None

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what == "host groups":
            return (
                f"{refusal.count} node(s) hold only part of a group the pods ask to be on "
                "one node (kubernetes.io/hostname), so they count whole groups only"
            )
        v = refusal.value
        ps = v("podset")
        who = "the gang" if ps == "gang" else f"PodSet {ps}"
        return (
            f"{who}: inner slice layer at {v('level')} needs groups of {v('size')} pods, "
            f"but {v('domain')} would hold {v('pods')}"
        )
