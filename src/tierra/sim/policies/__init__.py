"""Placement policies the simulator compares, listed by hand in ``POLICIES``.

``tierra`` is the real scheduler; the others are baselines built on the same topology
index: ``spread`` (topology-oblivious least-allocated, like kube-scheduler), ``firstfit``,
``volcano`` (Volcano's network-topology-aware allocate as documented) and ``kueue``
(Kueue TAS with the BestFit profile). Every one implements ``Policy`` (see ``base``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tierra.sim.policies import firstfit, kueue, spread, tierra, volcano
from tierra.sim.policies.base import (
    Placement,
    Policy,
    PolicyUnavailable,
    SessionOutcome,
)


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    name: str
    description: str
    make: Callable[[], Policy]


POLICIES: dict[str, PolicyInfo] = {
    tierra.NAME: PolicyInfo(tierra.NAME, tierra.DESCRIPTION, tierra.TierraPolicy),
    volcano.NAME: PolicyInfo(volcano.NAME, volcano.DESCRIPTION, volcano.VolcanoPolicy),
    kueue.NAME: PolicyInfo(kueue.NAME, kueue.DESCRIPTION, kueue.KueuePolicy),
    firstfit.NAME: PolicyInfo(firstfit.NAME, firstfit.DESCRIPTION, firstfit.FirstFitPolicy),
    spread.NAME: PolicyInfo(spread.NAME, spread.DESCRIPTION, spread.SpreadPolicy),
}
DEFAULT_POLICIES = tuple(POLICIES)

__all__ = [
    "DEFAULT_POLICIES",
    "POLICIES",
    "Placement",
    "Policy",
    "PolicyInfo",
    "PolicyUnavailable",
    "SessionOutcome",
]
