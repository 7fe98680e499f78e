"""Placement policies the simulator compares, listed by hand in ``POLICIES``.

``tierra`` (``tierra.py``) is the real scheduler, fed through its ``ClusterStore`` as the
Kubernetes scheduler feeds it; the others are baselines built on the same topology index:
``spread`` (``least_allocated.py``: topology-oblivious, like kube-scheduler), ``firstfit``,
``volcano`` (Volcano's network-topology-aware allocate as documented) and ``kueue``
(Kueue TAS with the BestFit profile). Every one implements ``SimPolicy`` (see ``base``).

Registered but not run by default (``tierra simulate --policies`` names them; the
quality benchmark runs them): ``firstfit-strict`` (first fit that keeps hard limits) and
tierra's link ablations ``tierra-misspec`` and ``tierra-nolinks`` (``tierra_ablations``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tierra.sim.policies import (
    firstfit,
    firstfit_strict,
    kueue,
    least_allocated,
    tierra,
    tierra_ablations,
    volcano,
)
from tierra.sim.policies.base import (
    Placement,
    PolicyUnavailable,
    SessionOutcome,
    SimPolicy,
)


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    name: str
    description: str
    make: Callable[[], SimPolicy]


POLICIES: dict[str, PolicyInfo] = {
    tierra.NAME: PolicyInfo(tierra.NAME, tierra.DESCRIPTION, tierra.TierraPolicy),
    volcano.NAME: PolicyInfo(volcano.NAME, volcano.DESCRIPTION, volcano.VolcanoPolicy),
    kueue.NAME: PolicyInfo(kueue.NAME, kueue.DESCRIPTION, kueue.KueuePolicy),
    firstfit.NAME: PolicyInfo(firstfit.NAME, firstfit.DESCRIPTION, firstfit.FirstFitPolicy),
    least_allocated.NAME: PolicyInfo(
        least_allocated.NAME, least_allocated.DESCRIPTION, least_allocated.LeastAllocatedPolicy
    ),
}
DEFAULT_POLICIES = tuple(POLICIES)  # what `tierra simulate` runs unless told otherwise
POLICIES |= {
    firstfit_strict.NAME: PolicyInfo(
        firstfit_strict.NAME, firstfit_strict.DESCRIPTION, firstfit_strict.FirstFitStrictPolicy
    ),
    tierra_ablations.MISSPEC: PolicyInfo(
        tierra_ablations.MISSPEC,
        tierra_ablations.MISSPEC_DESCRIPTION,
        tierra_ablations.TierraMisspecPolicy,
    ),
    tierra_ablations.NOLINKS: PolicyInfo(
        tierra_ablations.NOLINKS,
        tierra_ablations.NOLINKS_DESCRIPTION,
        tierra_ablations.TierraNoLinksPolicy,
    ),
}

__all__ = [
    "DEFAULT_POLICIES",
    "POLICIES",
    "Placement",
    "PolicyInfo",
    "PolicyUnavailable",
    "SessionOutcome",
    "SimPolicy",
]
