"""Binpack: fill the fullest domain that still fits, so empty domains stay whole.

Domains score Volcano's HyperNode binpack (``network-topology-aware`` plugin): the
weighted fraction of each resource in use once the gang is added, 0 if it would not
fit. Nodes score Volcano's "normal pod" fading: the binpack of the domain holding the
node at each tier, weighted ``fading^(tier-1)`` (a tier with no domain holding the node
scores 1, so nodes outside every HyperNode are used first), plus the node's own fill.
Pods without topology constraints therefore land in domains already in use instead of
breaking empty ones.

Arguments: ``resources`` (weight per resource name; default 1 for each, ``pods`` 0),
``fading`` (default 0.8), ``normalPod`` (default true), ``nodeWeight`` (weight of the
node's own fill, as a tier 0; default 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.base import (
    View,
    fill_after,
    parse_resource_weights,
    weights_for,
)
from tierra.scheduler.state.layout import Layouts
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray

NAME = "binpack"
ARGUMENTS = ("weight", "resources", "fading", "normalPod", "nodeWeight")


@dataclass(frozen=True, slots=True)
class Binpack:
    resources: tuple[tuple[str, float], ...] = ()
    fading: float = 0.8
    normal_pod: bool = True
    node_weight: float = 1.0
    name: str = field(default=NAME, init=False)
    packs: bool = field(default=True, init=False)

    def weights(self, view: View) -> FloatArray:
        return weights_for(view.capacity.axis.names, self.resources)

    def domain_scores(
        self, view: View, request: IntArray, domains: IntArray, allocated: int | None
    ) -> FloatArray:
        cap = view.capacity
        return fill_after(
            cap.dom_alloc[domains], cap.dom_used[domains], request, self.weights(view)
        )

    def node_scores(
        self, view: View, request: IntArray, nodes: IntArray, region: int, allocated: int | None
    ) -> FloatArray:
        cap, lay = view.capacity, view.layouts
        w = self.weights(view)
        own = fill_after(cap.node_alloc[nodes], cap.node_used[nodes], request, w)
        if not self.normal_pod or not lay.tiers:
            return own
        tier_w = np.array([self.fading ** (t - 1) for t in lay.tiers], dtype=np.float64)
        # each domain's fill once (only those holding these nodes, when they are fewer);
        # those holding all of region count as "no domain", unusable trees are not topology
        doms = self._domains(view, nodes)
        if doms is None:  # every domain: the ledger's rows as they are
            fill = fill_after(cap.dom_alloc, cap.dom_used, request, w)
            fill[_no_domain(view, region)] = 1.0
        else:
            fill = np.ones(len(cap.dom_alloc), dtype=np.float64)
            fill[doms] = fill_after(cap.dom_alloc[doms], cap.dom_used[doms], request, w)
            fill[doms[_no_domain(view, region)[doms]]] = 1.0
        if lay.shared_tiers:
            per = self._per_tier_shared(view, fill, nodes)
        else:  # per node and tier, its domain's fill (1 without one), one gather
            dom = _tier_domains(lay)[nodes]
            per = np.where(dom >= 0, fill[dom], 1.0)
        fading = (per @ tier_w) / tier_w.sum()
        total = self.node_weight + 1.0
        return np.asarray((self.node_weight * own + fading) / total, dtype=np.float64)

    @staticmethod
    def _domains(view: View, nodes: IntArray) -> IntArray | None:
        """The domains whose fill the scores of ``nodes`` read: all of them (None), or
        (for a few nodes, as the flat path rescores after each pod) those holding one."""
        lay, n_doms = view.layouts, len(view.capacity.dom_alloc)
        if len(nodes) * max(len(lay.tiers), 1) >= n_doms:
            return None
        if lay.shared_tiers:
            held = lay.node_entries(nodes)[1]
        else:
            held = np.concatenate([lay.node_dom[t][nodes] for t in lay.tiers])
        return np.unique(held[held >= 0])

    @staticmethod
    def _per_tier_shared(view: View, fill: FloatArray, nodes: IntArray) -> FloatArray:
        """Per node and tier, the mean fill of the domains (of any tree) holding it."""
        lay, ix = view.layouts, view.index
        pos = {t: i for i, t in enumerate(lay.tiers)}
        owner, doms = lay.node_entries(nodes)
        keep = (doms != ix.root) & ix.usable[doms]
        owner, doms = owner[keep], doms[keep]
        n_t = len(lay.tiers)
        tix = np.array([pos[int(t)] for t in ix.tier[doms]], dtype=np.int64)
        key = owner * n_t + tix
        cnt = np.bincount(key, minlength=len(nodes) * n_t).reshape(len(nodes), n_t)
        tot = np.bincount(key, weights=fill[doms], minlength=len(nodes) * n_t)
        tot = tot.reshape(len(nodes), n_t)
        return np.asarray(np.where(cnt > 0, tot / np.maximum(cnt, 1), 1.0), dtype=np.float64)


_NO_DOMAIN: dict[tuple[int, int], tuple[object, BoolArray]] = {}


def _no_domain(view: View, region: int) -> BoolArray:
    """Per domain, whether its fill counts as "no domain" for nodes of ``region``: it holds
    all of the region, or its tree is unusable. Kept per layout and region."""
    lay = view.layouts
    key = (id(lay), region)
    found = _NO_DOMAIN.get(key)
    if found is None or found[0] is not lay:
        if len(_NO_DOMAIN) > 256:
            _NO_DOMAIN.clear()
        every = np.arange(len(view.capacity.dom_alloc), dtype=np.int64)
        mask = lay.covers(every, region) | ~view.index.usable[every]
        found = _NO_DOMAIN[key] = (lay, mask)
    return found[1]


_TIER_DOMAINS: dict[int, tuple[object, IntArray]] = {}


def _tier_domains(lay: Layouts) -> IntArray:
    """Per node and tier (columns in ``lay.tiers`` order), its domain (-1: none): the
    per-tier ``node_dom`` arrays side by side, kept per layout."""
    found = _TIER_DOMAINS.get(id(lay))
    if found is None or found[0] is not lay:
        if len(_TIER_DOMAINS) > 16:
            _TIER_DOMAINS.clear()
        table = np.ascontiguousarray(np.stack([lay.node_dom[t] for t in lay.tiers], axis=1))
        found = _TIER_DOMAINS[id(lay)] = (lay, table)
    return found[1]


def parse(f: Fields) -> Binpack:
    weights = parse_resource_weights(f, NAME, ARGUMENTS)
    fading = f.number("fading")
    if fading is not None and not 0 <= fading <= 1:
        f.problem("fading", f"must be between 0 and 1, got {fading}")
        fading = None
    node_weight = f.number("nodeWeight")
    if node_weight is not None and node_weight < 0:
        f.problem("nodeWeight", f"must be >= 0, got {node_weight}")
        node_weight = None
    return Binpack(
        resources=weights,
        fading=0.8 if fading is None else fading,
        normal_pod=f.boolean("normalPod", True),
        node_weight=1.0 if node_weight is None else node_weight,
    )
