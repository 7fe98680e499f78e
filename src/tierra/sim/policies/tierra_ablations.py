"""tierra told less than the truth about its links: how much of its win is the cost model's.

tierra's simulator policy is handed the simulator's own link rates (HyperNodes'
``spec.link`` and a ``links`` table built from ``cost-model.yaml``), and the simulator
turns the same rates into slowdown. The baselines know tiers only. These two variants
bound the circular share of tierra's lead:

* ``tierra-misspec``: every rate tierra reads is off by up to ±30% (uniform, drawn per
  HyperNode for ``spec.link`` and per key of the table, from the run's seed and the
  name, so the same run always draws the same errors) while the simulator judges with
  the true ones: what an operator's rough numbers would give;
* ``tierra-nolinks``: no ``spec.link`` and no table at all, so the scheduler keeps only
  the tier order (``UNKNOWN_GBPS / 2**tier``, ``tierra.scheduler`` link fallback): what
  it does on a cluster whose HyperNodes say nothing about their links.

Neither is a default policy; ``bench/quality.py`` runs them beside ``tierra``.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np

from tierra.api.hypernode import HyperNode, LinkSpec
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import BoundCost, TierCost
from tierra.sim.policies.tierra import TierraPolicy

MISSPEC = "tierra-misspec"
MISSPEC_DESCRIPTION = "tierra told every link rate off by up to ±30% (seeded, per link)"
NOLINKS = "tierra-nolinks"
NOLINKS_DESCRIPTION = "tierra told only the tier order: no spec.link, no links table"
ERROR = 0.3  # the largest relative error of a mis-specified rate


def perturbation(seed: int, key: str, error: float = ERROR) -> float:
    """The factor one link's rate is told with: uniform in ``[1 - error, 1 + error]``,
    fixed by the run's seed and the link's name (``crc32``, stable across processes)."""
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    return float(1.0 + error * rng.uniform(-1.0, 1.0))


def misspecified_link(link: LinkSpec | None, factor: float) -> LinkSpec | None:
    if link is None or link.bandwidth_gbps is None:
        return link
    return replace(link, bandwidth_gbps=link.bandwidth_gbps * factor)


class TierraMisspecPolicy(TierraPolicy):
    name = MISSPEC

    def links_told(
        self, cluster: SimCluster, cost: BoundCost, seed: int
    ) -> tuple[tuple[HyperNode, ...], dict[str, TierCost]]:
        hypernodes = tuple(
            replace(h, link=misspecified_link(h.link, perturbation(seed, f"hypernode/{h.name}")))
            for h in cluster.hypernodes
        )
        rates = {
            key: replace(tc, bandwidth_gbps=tc.bandwidth_gbps * perturbation(seed, f"tier/{key}"))
            for key, tc in cost.model.tiers.items()
        }
        return hypernodes, rates


class TierraNoLinksPolicy(TierraPolicy):
    name = NOLINKS

    def links_told(
        self, cluster: SimCluster, cost: BoundCost, seed: int
    ) -> tuple[tuple[HyperNode, ...], dict[str, TierCost]]:
        del cost, seed
        return tuple(replace(h, link=None) for h in cluster.hypernodes), {}
