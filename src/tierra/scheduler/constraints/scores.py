"""The configured scoring policies (binpack, spread, topology, the look-ahead) as the
score share of the protocol: each enabled policy's score times its weight, summed.

The policies themselves are one module each in ``scoring/`` and are chosen by the
configuration's ``policies``; this constraint is how they reach the domain search and
the flat path. It reads only its arguments and the ledger, never the gang, so the flat
path may keep its node scores from one gang to the next (``placement/flat_state.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle

if TYPE_CHECKING:
    from tierra.topology.arrays import FloatArray
    from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class PolicyScores(Constraint):
    name = "policy-scores"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # reads the view and the ledger, never the gang

    def domain_scores(
        self, cycle: Cycle, request: IntArray, domains: IntArray, sticky: int | None
    ) -> FloatArray | None:
        total = np.zeros(len(domains), dtype=np.float64)
        for wp in cycle.config.policies:
            if wp.weight:
                scores = wp.policy.domain_scores(cycle.view, request, domains, sticky)
                total += wp.weight * 100.0 * scores
        return np.round(total, 6)

    def node_scores(
        self, cycle: Cycle, request: IntArray, nodes: IntArray, region: int
    ) -> FloatArray | None:
        total = np.zeros(len(nodes), dtype=np.float64)
        for wp in cycle.config.policies:
            if wp.weight:
                scores = wp.policy.node_scores(cycle.view, request, nodes, region, None)
                total += wp.weight * 100.0 * scores
        return np.round(total, 6)
