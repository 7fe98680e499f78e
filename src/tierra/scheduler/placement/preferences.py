"""The pods' own preferences in placement: the ``pod_scores`` share, asked and used.

Every constraint answering ``pod_scores`` (kube-scheduler's scores that read the pod:
``podrules/preferences.py``) gives, per node, a share normalized over the nodes with
room for the pod. The session uses it in three places (``docs/scheduling-contract.md``,
"Preferences"):

* the flat path adds it to the node scores (``flat``), so a lone pod or a gang without a
  topology constraint goes where kube-scheduler's score would send it among equals;
* the domain search adds each candidate's share to its score (``Preferring.domains``):
  the best the candidate's nodes give the gang's pods, taken pod slot by pod slot from
  the most preferred node down -- after reach, preferred tiers, whole sub-groups and
  cost, which the gang's topology decides, so preferences choose among equal domains;
* node choice inside a chosen domain orders its units by it (``unit``): of the units
  that hold the rest, the most preferred; of those that do not, among equal room, the
  most preferred -- so preferences pick the nodes inside the domain, never a unit that
  would split the gang further.

A gang whose pods prefer nothing, beside placed pods whose terms score none, pays
nothing: their ``applies`` leave these constraints out of its cycle.
"""

from __future__ import annotations

import numpy as np

from tierra.scheduler.constraints.protocol import Cycle
from tierra.scheduler.placement.demand import Demand, Shape
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray


def pod_scores(
    cycle: Cycle, shape: Shape, nodes: IntArray, feasible: BoolArray
) -> FloatArray | None:
    """Every ``pod_scores`` constraint's share for ``shape`` on ``nodes``, summed."""
    total: FloatArray | None = None
    for c in cycle.hooks.pod_scores:
        part = c.pod_scores(cycle, shape, nodes, feasible)
        if part is not None:
            total = part if total is None else total + part
    return total


def over(cycle: Cycle, shape: Shape, nodes: IntArray, per_node: IntArray) -> FloatArray | None:
    """``shape``'s share on ``nodes`` as an array over every node of the index (0 off
    them), feasible where ``per_node`` (counts over every node) has room; None: none."""
    if not cycle.hooks.pod_scores:
        return None
    found = pod_scores(cycle, shape, nodes, per_node[nodes] > 0)
    if found is None:
        return None
    full = np.zeros(len(per_node), dtype=np.float64)
    full[nodes] = found
    return full


def best_sums(
    counts: IntArray, scores: FloatArray, group: IntArray, groups: int, need: int
) -> FloatArray:
    """Per group, the summed score of the best ``need`` pod slots: each entry holds
    ``counts`` pods at ``scores`` each, taken most preferred first (ties in order)."""
    out = np.zeros(groups, dtype=np.float64)
    if len(counts) == 0 or need <= 0:
        return out
    order = np.lexsort((-scores, group))
    v = np.minimum(counts[order], need)
    w, g = scores[order], group[order]
    cum = np.cumsum(v)
    start = np.searchsorted(g, np.arange(groups, dtype=np.int64))
    base = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0)
    before = cum - v - base[g]
    take = np.clip(need - before, 0, v)
    np.add.at(out, g, take * w)
    return out


def unit(nodes: IntArray, per_node: IntArray, prefs: FloatArray, need: int) -> float:
    """The mean share of the best ``need`` pod slots on ``nodes`` (node choice's unit)."""
    if len(nodes) == 0 or need <= 0:
        return 0.0
    group = np.zeros(len(nodes), dtype=np.int64)
    return float(best_sums(per_node[nodes], prefs[nodes], group, 1, need)[0]) / need


class Preferring:
    """One domain search's preference shares: per shape, its share over the region's
    nodes (feasible where the search counted room), made once when the search starts."""

    def __init__(
        self, cycle: Cycle, demand: Demand, per_node: list[IntArray], region_nodes: IntArray
    ) -> None:
        self.needs = [len(s.pods) for s in demand.shapes]
        self.total = max(1, sum(self.needs))
        self.per_node = per_node
        self.prefs = [
            over(cycle, s, region_nodes, pn) for s, pn in zip(demand.shapes, per_node, strict=True)
        ]
        self.any = any(p is not None for p in self.prefs)

    def domains(self, nodes: IntArray, group: IntArray, groups: int) -> FloatArray:
        """Per candidate domain (``group`` of each entry of ``nodes``), the mean share of
        the gang's best pod slots inside it."""
        out = np.zeros(groups, dtype=np.float64)
        for prefs, pn, need in zip(self.prefs, self.per_node, self.needs, strict=True):
            if prefs is not None:
                out += best_sums(pn[nodes], prefs[nodes], group, groups, need)
        return np.round(out / self.total, 6)
