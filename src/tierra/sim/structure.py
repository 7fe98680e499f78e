"""What a gang's rank order and slices make of its placement's cost.

The cost model (``cost.py``) charges a job the per-GPU bandwidth of the slowest tier its
pods span, ``bandwidthGBps / oversubscription``: every one of its GPUs pushing through
the oversubscribed uplinks at once, which is what traffic between ranks that bear no
relation to the placement does. Two structures a gang can declare change that.

**Rank order** (``topology.tierra.dev/rank-label``, Kueue's rank-ordered slots).
Training frameworks lay their parallel groups out so that the ranks that talk most are
adjacent (the Llama 3 paper, arXiv 2407.21783 §3.3.2: the order [TP, CP, PP, DP], data
parallel outermost because it tolerates the slower links), and collectives chain ranks
into rings and pipelines in rank order -- the reason Kueue places consecutive ranks in
one domain where it can (KEP-2724, "rank-based ordering"). Modelled as one ring in rank
order: it sends, through the uplink of a domain ``x`` holding ``k`` of the job's pods,
``crossings(x) / 2`` pods' worth of traffic each way (an edge of the ring leaves or enters
``x``), not ``k``: ranks laid out contiguously cross each uplink once each way, ranks
scattered up to ``k`` times -- the all-GPUs case the cost model already charges. So a
ranked job's bandwidth through ``x``'s uplink (parent ``p``) is::

    min(raw(p), effective(p) * k / max(crossings(x) / 2, 1))

and the job's span bandwidth is the least of those over every uplink its ring crosses:
scattered ranks keep the cost model's figure, contiguous ones get up to the line rate
of an oversubscribed tier. A non-blocking tier (oversubscription 1) gives nothing either
way: there rank order costs or saves nothing, as on the real fabric.

**Slices** (``topology.tierra.dev/slices``, Kueue's ``podset-slice-*``). A sliced gang is
a 3D-parallel job whose pipeline (and tensor) parallel traffic stays inside a slice and
whose data-parallel all-reduce crosses slices. The cost model's ``sliceShare`` of its
communication is carried inside the slices, split evenly over the layers, each layer at
the bandwidth of its worst slice's span (the collectives are synchronous: the slowest
group sets the pace) against the best a slice of that size could have; the rest at the
whole job's span. A slice that straddles a domain of its tier (a policy that ignores
slices) therefore costs its inner traffic the slower link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tierra.sim.cost import BoundCost
from tierra.sim.workloads import SliceLayer

Uplink = int  # a domain index, or ``-1 - n`` for node n's own uplink


@dataclass(frozen=True, slots=True)
class Ring:
    """A ranked job's ring over its placement."""

    gbps: float  # its span bandwidth with the ring's crossings counted (see above)
    contiguous: bool  # no uplink crossed more than once each way


@dataclass(frozen=True, slots=True)
class SliceSpan:
    """One slice layer of a placed job."""

    layer: SliceLayer
    worst_gbps: float  # the slowest slice's span bandwidth
    kept: bool  # every slice inside one domain of the layer's tier


def _chain(cost: BoundCost, node: int, top: int) -> list[int]:
    """Domains holding ``node`` strictly below ``top``, lowest first, then ``top``."""
    index = cost.index
    for leaf in index.leaf_idx[index.leaf_ptr[node] : index.leaf_ptr[node + 1]].tolist():
        chain = index.ancestors(int(leaf))
        if top in chain:
            return chain[: chain.index(top) + 1]
    return [top]


def ring(cost: BoundCost, nodes: Sequence[int], top: int, span_gbps: float) -> Ring:
    """The ring of a job whose pod of rank r is on ``nodes[r]``, spanning domain ``top``
    (``span_gbps`` its plain span bandwidth; ``top`` -1: one node)."""
    if top < 0 or len(nodes) < 2:
        return Ring(span_gbps, True)
    uplinks: dict[int, list[tuple[Uplink, int]]] = {}  # node -> (uplink, its parent)
    for n in sorted(set(nodes)):
        chain = _chain(cost, n, top)
        links = [(-1 - n, chain[0])]
        links += [(chain[i], chain[i + 1]) for i in range(len(chain) - 1)]
        uplinks[n] = links
    pods: dict[Uplink, int] = {}
    parent: dict[Uplink, int] = {}
    for n in nodes:
        for x, p in uplinks[n]:
            pods[x] = pods.get(x, 0) + 1
            parent[x] = p
    cross: dict[Uplink, int] = {}
    for r, a in enumerate(nodes):
        b = nodes[(r + 1) % len(nodes)]
        if a == b:
            continue
        mine = {x for x, _ in uplinks[a]}
        theirs = {x for x, _ in uplinks[b]}
        for x in mine ^ theirs:
            cross[x] = cross.get(x, 0) + 1
    best = float("inf")
    for x, c in cross.items():
        p = parent[x]
        eff = float(cost.domain_gbps[p]) * pods[x] / max(c / 2, 1.0)
        best = min(best, float(cost.domain_raw_gbps[p]), eff)
    contiguous = all(c <= 2 for c in cross.values())
    return Ring(max(best, span_gbps) if best < float("inf") else span_gbps, contiguous)


def slice_spans(
    cost: BoundCost, nodes: Sequence[int], layers: Sequence[SliceLayer]
) -> list[SliceSpan]:
    """Each layer's slices (pods ``[k * size, (k + 1) * size)`` of ``nodes``, in rank
    order) as placed: the slowest one's span bandwidth and whether all kept their tier."""
    out = []
    for layer in layers:
        worst = float("inf")
        kept = True
        for k in range(0, len(nodes) - layer.size + 1, layer.size):
            domain, gbps = cost.span(nodes[k : k + layer.size])
            worst = min(worst, gbps)
            kept = kept and cost.tier_of_span(domain) <= layer.tier
        out.append(SliceSpan(layer, worst, kept))
    return out
