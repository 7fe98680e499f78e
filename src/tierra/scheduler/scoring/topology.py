"""Topology: keep a gang's new pods close to the pods it already runs.

Volcano's node score for tasks of a topology-constrained group, applied to domains
too: with ``A`` the domain the gang's running (or already placed) pods occupy, a
candidate scores ``(rootTier - tier(LCA(candidate, A))) / (rootTier - minTier)``; 1 in
``A`` itself, falling as the common ancestor rises. A gang with nothing placed yet
scores 0 everywhere (Volcano: "the node score is 0 on first placement").

No arguments besides ``weight``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.base import View, reject_unknown
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

NAME = "topology"
ARGUMENTS = ("weight",)


@dataclass(frozen=True, slots=True)
class Topology:
    name: str = field(default=NAME, init=False)
    packs: bool = field(default=True, init=False)

    @staticmethod
    def _closeness(view: View, lca_tier: IntArray) -> FloatArray:
        top, low = view.layouts.root_tier, view.layouts.min_tier
        if top == low:
            return np.ones(len(lca_tier), dtype=np.float64)
        return np.asarray((top - lca_tier) / (top - low), dtype=np.float64).clip(0.0, 1.0)

    def domain_scores(
        self, view: View, request: IntArray, domains: IntArray, allocated: int | None
    ) -> FloatArray:
        if allocated is None:
            return np.zeros(len(domains), dtype=np.float64)
        ix = view.index
        tiers = np.array([int(ix.tier[ix.lca(int(d), allocated)]) for d in domains], np.int64)
        return self._closeness(view, tiers)

    def node_scores(
        self, view: View, request: IntArray, nodes: IntArray, region: int, allocated: int | None
    ) -> FloatArray:
        if allocated is None:
            return np.zeros(len(nodes), dtype=np.float64)
        ix = view.index
        chain = ix.ancestors(allocated)
        rank = np.full(ix.root + 1, len(chain), dtype=np.int64)
        rank[np.array(chain, dtype=np.int64)] = np.arange(len(chain), dtype=np.int64)
        owner, doms = view.layouts.node_entries(nodes)
        best = np.full(len(nodes), len(chain) - 1, dtype=np.int64)  # the root holds all
        np.minimum.at(best, owner, rank[doms])
        tiers = ix.tier[np.array(chain, dtype=np.int64)][np.minimum(best, len(chain) - 1)]
        return self._closeness(view, tiers)


def parse(f: Fields) -> Topology:
    for key in reject_unknown(dict(f.data), ARGUMENTS):
        f.problem(key, f"unknown argument of policy {NAME}; it takes only weight")
    return Topology()
