"""Binpack: fill the fullest domain that still fits, so empty domains stay whole.

Domains score Volcano's HyperNode binpack (``network-topology-aware`` plugin): the
weighted fraction of each resource in use once the gang is added, 0 if it would not
fit. Nodes score Volcano's "normal pod" fading: the binpack of the domain holding the
node at each tier, weighted ``fading^(tier-1)`` (a tier with no domain holding the node
scores 1, so nodes outside every HyperNode are used first), plus the node's own fill.
Pods without topology constraints therefore land in domains already in use instead of
breaking empty ones.

Node scores read each node's and domain's fill from ``_kept_fills``, kept beside the
ledger and refreshed from its move log: after a lone pod only its node's and domains'
fills change, and the flat path rescores the node's whole spine (512 nodes at 10,000),
which otherwise filled every domain and every rescored node again for each pod.

Arguments: ``resources`` (weight per resource name; default 1 for each, ``pods`` 0),
``fading`` (default 0.8), ``normalPod`` (default true), ``nodeWeight`` (weight of the
node's own fill, as a tier 0; default 1).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.base import (
    FillTerms,
    View,
    fill_after,
    fill_row,
    fill_terms,
    parse_resource_weights,
    weights_for,
)
from tierra.scheduler.state.layout import Layouts
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.capacity import Capacity
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
        if not self.normal_pod or not lay.tiers:
            return fill_after(cap.node_alloc[nodes], cap.node_used[nodes], request, w)
        # kept when asked over much of the cluster (a flat state's build): a few nodes of
        # a small region with a request never kept would pay a pass over every node
        kept = _kept_fills(cap, request, w, create=4 * len(nodes) >= len(cap.node_used))
        if kept is None:
            own = fill_after(cap.node_alloc[nodes], cap.node_used[nodes], request, w)
            dom_fill = fill_after(cap.dom_alloc, cap.dom_used, request, w)
        else:
            own, dom_fill = kept.own[nodes], kept.dom
        tier_w, tier_sum = _tier_weights(self.fading, lay.tiers)
        # each domain's fill (kept); those holding all of region count as "no domain",
        # unusable trees are not topology
        fill = np.where(_no_domain(view, region), 1.0, dom_fill)
        if lay.shared_tiers:
            per = self._per_tier_shared(view, fill, nodes)
        else:  # per node and tier, its domain's fill (1 without one), one gather
            dom = _tier_domains(lay)[nodes]
            per = np.where(dom >= 0, fill[dom], 1.0)
        fading = (_rows(per) @ tier_w)[: len(per)] / tier_sum
        total = self.node_weight + 1.0
        return np.asarray((self.node_weight * own + fading) / total, dtype=np.float64)

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


@dataclass(slots=True)
class _Fills:
    """One request's fill of every node and domain, as of ``seen`` entries of ``log``."""

    used: IntArray  # the ledger's ``node_used`` and ``dom_used`` they were computed on
    dom_used: IntArray
    log: list[IntArray]
    seen: int
    own: FloatArray  # per node
    dom: FloatArray  # per domain, the root last
    terms: FillTerms  # the request and weights, as ``fill_row`` reads them


_PYTHON_ROWS = 8  # moved nodes refreshed in Python floats; more take the array passes
_FILLS_KEPT = 16  # requests (and weights) per ledger; the least recently used goes
# per ledger, its kept fills: beside it (derived data), gone with it
_FILLS: weakref.WeakKeyDictionary[Capacity, OrderedDict[bytes, _Fills]] = (
    weakref.WeakKeyDictionary()
)


def _kept_fills(
    cap: Capacity, request: IntArray, w: FloatArray, *, create: bool = True
) -> _Fills | None:
    """``fill_after`` of every node and domain for ``request``, kept beside the ledger and
    brought up to date from its move log (``Capacity.move_log``): a moved node changes its
    own row and its domains' rows, nothing else. The flat path rescores a placed node's
    spine after every lone pod; these two passes over every row were most of it. Each
    row's fill is what ``fill_after`` gives it alone (its sums are row by row). Not
    kept yet and not ``create``: None."""
    states = _FILLS.get(cap)
    if states is None:
        states = _FILLS[cap] = OrderedDict()
    key = request.tobytes() + w.tobytes()
    log = cap.move_log
    kept = states.get(key)
    if (
        kept is None
        or kept.used is not cap.node_used
        or kept.dom_used is not cap.dom_used
        or kept.log is not log
        or kept.seen > len(log)
    ):
        if not create:
            return None
        own = fill_after(cap.node_alloc, cap.node_used, request, w)
        dom = fill_after(cap.dom_alloc, cap.dom_used, request, w)
        terms = fill_terms(request, w)
        kept = _Fills(cap.node_used, cap.dom_used, log, len(log), own, dom, terms)
        states[key] = kept
        if len(states) > _FILLS_KEPT:
            states.popitem(last=False)
        return kept
    states.move_to_end(key)
    if kept.seen < len(log):
        since = log[kept.seen :]
        moved = since[0] if len(since) == 1 else np.unique(np.concatenate(since))
        kept.seen = len(log)
        if 4 * len(moved) >= len(kept.own):  # most rows: one pass over all
            kept.own = fill_after(cap.node_alloc, cap.node_used, request, w)
            kept.dom = fill_after(cap.dom_alloc, cap.dom_used, request, w)
            return kept
        if len(moved) > _PYTHON_ROWS:
            doms = _domains_of(cap, moved)
            kept.own[moved] = fill_after(cap.node_alloc[moved], cap.node_used[moved], request, w)
            kept.dom[doms] = fill_after(cap.dom_alloc[doms], cap.dom_used[doms], request, w)
            return kept
        # a few rows (a lone pod's node and its domains): in Python floats, same values
        for n in moved.tolist():
            kept.own[n] = fill_row(
                cap.node_alloc[n].tolist(), cap.node_used[n].tolist(), kept.terms
            )
        doms = cap.index.domains_of(int(moved[0])) if len(moved) == 1 else _domains_of(cap, moved)
        alloc, used = cap.dom_alloc[doms].tolist(), cap.dom_used[doms].tolist()
        for d, a, u in zip(doms.tolist(), alloc, used, strict=True):
            kept.dom[d] = fill_row(a, u, kept.terms)
    return kept


def _domains_of(cap: Capacity, nodes: IntArray) -> IntArray:
    """Every domain (the root included) holding one of ``nodes``."""
    ix = cap.index
    starts, lens = ix.domain_ptr[nodes], ix.domain_ptr[nodes + 1] - ix.domain_ptr[nodes]
    skip = np.repeat(starts - (np.cumsum(lens) - lens), lens)  # each entry's row offset
    return np.unique(ix.domain_idx[np.arange(int(lens.sum()), dtype=np.int64) + skip])


def _rows(per: FloatArray) -> FloatArray:
    """``per`` for a matrix product whose rows do not depend on one another: numpy adds
    one row's products in another order than several rows' (1 bit apart in about one row
    in six), and the flat path rescores a single node against scores made many at a
    time, so one row goes in twice."""
    return np.repeat(per, 2, axis=0) if len(per) == 1 else per


_TIER_WEIGHTS: dict[tuple[float, tuple[int, ...]], tuple[FloatArray, float]] = {}


def _tier_weights(fading: float, tiers: tuple[int, ...]) -> tuple[FloatArray, float]:
    """``fading^(tier-1)`` per tier and their sum, kept per fading and tiers (the flat
    path asks for every pod it places)."""
    found = _TIER_WEIGHTS.get((fading, tiers))
    if found is None:
        if len(_TIER_WEIGHTS) > 64:
            _TIER_WEIGHTS.clear()
        w = np.array([fading ** (t - 1) for t in tiers], dtype=np.float64)
        w.setflags(write=False)
        found = _TIER_WEIGHTS[(fading, tiers)] = (w, float(w.sum()))
    return found


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
