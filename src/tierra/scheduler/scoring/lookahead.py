"""Look-ahead: keep room for the gangs likely to come next.

Binpack fills the fullest domain; it cannot tell a domain that is nearly the last place
a common gang shape still fits from one that no such gang could use anyway. This policy
scores a placement by what it takes from the gangs of the recent mix (``mix.py``: the
shapes, pods x GPUs per pod, that carried most of the recent GPU demand), the way FGD
scores a task by the fragmentation it adds [FGD]:

* each shape has a *home*: the nodes or domains where it reaches its best bandwidth in
  the empty cluster (``links.py``) and fits whole -- one 8-GPU node for an 8-GPU pod,
  a ToR for a 64-GPU gang on the fat tree, an NVL72 rack for a 16 x 4-GPU gang;
* placing ``r`` GPUs inside a home with ``f`` free GPUs costs that shape
  ``floor(f / g) - floor((f - r) / g)`` whole copies (``g`` its GPUs); a candidate that
  holds homes below it costs the copies the gang's GPUs would take from them, in
  proportion to how much of the candidate's free room they are;
* the score is ``1 / (1 + lost / r)``, ``lost`` the copies' GPUs weighted by each
  shape's share of the demand: 1 when no likely gang loses a home.

So a single 4-GPU pod goes to an H100 node rather than into an NVL72 rack a 64-GPU gang
could use whole, and a 128-GPU gang that will run over InfiniBand either way takes H100
leaves rather than two empty racks. The measure is the simulator's fragmentation (the
share of free GPUs that cannot serve a gang of each common shape), counted on the
domains' free GPUs rather than node by node, so it costs a few array operations.

Arguments: ``weight`` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.base import View, reject_unknown
from tierra.scheduler.scoring.links import LinkCosts
from tierra.scheduler.scoring.mix import ShapeShare
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray

NAME = "lookahead"
ARGUMENTS = ("weight",)
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Home:
    """Where one shape reaches its best bandwidth: nodes (tier 0) or domains of one tier."""

    tier: int
    mask: BoolArray  # over nodes when tier is 0, else over domains
    members: IntArray  # the mask's indices


def home(view: View, links: LinkCosts, shape: ShapeShare, g: int) -> Home | None:
    """The shape's home in the empty cluster (memoised on ``links``, one per index)."""
    key = ("home", shape.pods, shape.gpus_per_pod)
    if key in links.memo:
        found = links.memo[key]
        return found if isinstance(found, Home) else None
    ix = view.index
    per_node = view.capacity.node_alloc[:, g] // (1000 * shape.gpus_per_pod)
    on_node = per_node >= shape.pods
    best_node = float(links.node_gbps[on_node].max(initial=0.0))
    per_dom = ix.sum_under(per_node)
    holds = per_dom >= shape.pods
    holds[ix.root] = False
    holds &= np.append(ix.usable[: ix.root], False)
    best_dom = float(links.domain_gbps[holds].max(initial=0.0))
    result: Home | None = None
    if best_node > 0 and best_node >= best_dom:
        mask = on_node & (links.node_gbps >= best_node)
        result = Home(0, mask, np.flatnonzero(mask))
    elif best_dom > 0:
        best = holds & (links.domain_gbps >= best_dom)
        tier = int(ix.tier[best].min())  # the lowest such tier: homes do not nest
        mask = best & (ix.tier == tier)
        result = Home(tier, mask, np.flatnonzero(mask))
    links.memo[key] = result
    return result


def _lost(copies_before: IntArray, copies_after: IntArray) -> IntArray:
    return np.asarray(np.maximum(copies_before - copies_after, 0), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class _TierHomes:
    """The shapes of a mix whose homes are domains of one tier, one row per shape."""

    tier: int
    rows: tuple[int, ...]  # each shape's place in the mix's homes
    sizes: IntArray  # (shapes, 1): GPUs a copy takes
    weights: FloatArray  # (shapes, 1): the shape's share of the demand
    masks: BoolArray  # (shapes, domains): the homes
    members: IntArray  # every shape's home domains, one after the other
    member_row: IntArray  # ... the row each belongs to
    member_tin: IntArray  # ... its depth-first entry

    @staticmethod
    def of(view: View, homes: list[tuple[ShapeShare, Home]], tier: int) -> _TierHomes:
        at = [i for i, (_, h) in enumerate(homes) if h.tier == tier]
        picked = [homes[i] for i in at]
        members = np.concatenate([h.members for _, h in picked])
        row = np.repeat(np.arange(len(at)), [len(h.members) for _, h in picked])
        return _TierHomes(
            tier=tier,
            rows=tuple(at),
            sizes=np.array([[s.gpus] for s, _ in picked], dtype=np.int64),
            weights=np.array([[s.weight] for s, _ in picked], dtype=np.float64),
            masks=np.stack([h.mask for _, h in picked]),
            members=members.astype(np.int64),
            member_row=row.astype(np.int64),
            member_tin=view.layouts.tin[members],
        )


@dataclass(frozen=True, slots=True)
class Lookahead:
    name: str = field(default=NAME, init=False)
    packs: bool = field(default=True, init=False)

    def _homes(self, view: View) -> tuple[int | None, list[tuple[ShapeShare, Home]]]:
        g = view.capacity.axis.index.get(GPU)
        if g is None or view.links is None or not view.mix:
            return None, []
        # one session's mix asks the same for every gang; only the last mix is kept (it
        # changes from session to session: one entry per mix would grow without end)
        last = view.links.memo.get("homes")
        if isinstance(last, tuple) and (last[0] is view.mix or last[0] == view.mix):
            return g, last[1]
        out = []
        for shape in view.mix:
            if shape.gpus <= 1:
                continue  # a single GPU fits anywhere there is one
            h = home(view, view.links, shape, g)
            if h is not None:
                out.append((shape, h))
        view.links.memo["homes"] = (view.mix, out)
        return g, out

    def _stacked(self, view: View, homes: list[tuple[ShapeShare, Home]]) -> list[_TierHomes]:
        """``homes`` by home tier, stacked (memoised beside ``homes``: the same mix)."""
        assert view.links is not None
        last = view.links.memo.get("stacked")
        if isinstance(last, tuple) and last[0] is homes and last[1] is view.layouts:
            return cast("list[_TierHomes]", last[2])
        out = [
            _TierHomes.of(view, homes, tier)
            for tier in dict.fromkeys(h.tier for _, h in homes if h.tier > 0)
        ]
        view.links.memo["stacked"] = (homes, view.layouts, out)
        return out

    def domain_scores(
        self, view: View, request: IntArray, domains: IntArray, allocated: int | None
    ) -> FloatArray:
        """Each shape's lost copies, per candidate: all shapes homed at one tier in one
        pass of (shapes x candidates) arrays, added up shape by shape in the mix's order
        (the sums as one shape at a time made them, to the last bit). One shape at a
        time took 15 to 30 small array operations each, a fifth of a 64-pod gang's
        domain search at 10,000 nodes."""
        ones = np.ones(len(domains), dtype=np.float64)
        g, homes = self._homes(view)
        if g is None or not homes or len(domains) == 0:
            return ones
        r = float(request[g]) / 1000
        if r <= 0:
            return ones
        ix, lay, cap = view.index, view.layouts, view.capacity
        free = np.maximum(cap.dom_alloc[:, g] - cap.dom_used[:, g], 0) // 1000
        tiers = ix.tier[domains]
        # each candidate's first node (candidates hold nodes: they fit the gang)
        first_node = ix.real_idx[np.minimum(ix.real_ptr[domains], len(ix.real_idx) - 1)]
        rows: dict[int, list[FloatArray]] = {}  # shape (its place in homes) -> its terms
        order: IntArray | None = None
        sorted_tins = touts = np.zeros(0, dtype=np.int64)
        n = len(domains)
        for th in self._stacked(view, homes):
            above = lay.node_dom.get(th.tier)
            if above is not None:  # the candidate inside (or equal to) one of the homes
                grp = above[first_node]
                within = (tiers <= th.tier) & (grp >= 0)
                grp = np.where(within, grp, 0)
                inside = within & th.masks[:, grp]
                f = free[grp]
                taken = _lost(f // th.sizes, np.maximum(f - int(np.ceil(r)), 0) // th.sizes)
                terms = np.where(inside, taken * th.sizes * th.weights, 0.0)
                for i, row in enumerate(th.rows):
                    rows.setdefault(row, []).append(terms[i])
            below = tiers > th.tier  # homes below the candidate: its GPUs come out of them
            if below.any():
                if order is None:  # the candidates in depth-first order, once per call
                    tins, touts = lay.tin[domains], lay.tout[domains]
                    order = np.argsort(tins, kind="stable")
                    sorted_tins = tins[order]
                owner = np.searchsorted(sorted_tins, th.member_tin, side="right") - 1
                ok = owner >= 0
                owner = order[np.maximum(owner, 0)]
                ok &= th.member_tin < touts[owner]
                at = th.member_row[ok] * n + owner[ok]
                home_f = free[th.members[ok]]
                size_of = th.sizes[:, 0][th.member_row[ok]]
                k = len(th.rows) * n
                home_free = np.bincount(at, weights=home_f, minlength=k).reshape(-1, n)
                copies = np.bincount(at, weights=home_f // size_of, minlength=k).reshape(-1, n)
                fd = free[domains]
                share = np.where(fd > 0, home_free / np.maximum(fd, 1), 0)
                taken_f = np.minimum(copies, np.floor(r * share / th.sizes))
                terms = np.where(below, taken_f * th.sizes * th.weights, 0.0)
                for i, row in enumerate(th.rows):
                    rows.setdefault(row, []).append(terms[i])
        terms_in_order = [term for row in sorted(rows) for term in rows[row]]
        lost = np.zeros(n, dtype=np.float64)
        if terms_in_order:  # a running sum is one term after the other, as a loop adds them
            lost = np.cumsum(np.vstack(terms_in_order), axis=0)[-1]
        return np.asarray(1.0 / (1.0 + lost / r), dtype=np.float64)

    def node_scores(
        self, view: View, request: IntArray, nodes: IntArray, region: int, allocated: int | None
    ) -> FloatArray:
        ones = np.ones(len(nodes), dtype=np.float64)
        g, homes = self._homes(view)
        if g is None or not homes or len(nodes) == 0:
            return ones
        r = int(request[g]) // 1000
        if r <= 0:
            return ones
        cap, lay = view.capacity, view.layouts
        node_free = np.maximum(cap.node_alloc[nodes, g] - cap.node_used[nodes, g], 0) // 1000
        dom_free = np.maximum(cap.dom_alloc[:, g] - cap.dom_used[:, g], 0) // 1000
        lost = np.zeros(len(nodes), dtype=np.float64)
        holders: dict[int, tuple[IntArray, BoolArray]] = {}  # per home tier, once per call
        for shape, h in homes:
            size = shape.gpus
            if h.tier == 0:
                taken = _lost(node_free // size, np.maximum(node_free - r, 0) // size)
                lost += np.where(h.mask[nodes], taken * size * shape.weight, 0.0)
                continue
            owner = lay.node_dom.get(h.tier)
            if owner is None:
                continue
            held = holders.get(h.tier)
            if held is None:
                grp = owner[nodes]
                within = grp >= 0
                held = holders[h.tier] = (np.where(within, grp, 0), within)
            grp, within = held
            # what each home domain loses, then handed to the nodes inside it: the same
            # values as node by node, at the cost of one gather per shape
            taken = _lost(dom_free // size, np.maximum(dom_free - r, 0) // size)
            per_dom = np.where(h.mask, taken * size * shape.weight, 0.0)
            lost += np.where(within, per_dom[grp], 0.0)
        return np.asarray(1.0 / (1.0 + lost / r), dtype=np.float64)


def parse(f: Fields) -> Lookahead:
    for key in reject_unknown(dict(f.data), ARGUMENTS):
        f.problem(key, f"unknown argument of policy {NAME}; it takes only weight")
    return Lookahead()
