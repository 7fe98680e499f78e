"""Degraded domains: HyperNodes holding NotReady, cordoned or NoExecute-tainted nodes.

For a new gang (``degradedHyperNodes``): ``exclude`` rules them out after counting (so
explain still names the best of them), ``avoid`` tries them after the healthy ones of
the same reach, ``ignore`` treats them like any other. A gang whose pods already run
ignores health (its new pods stay near the old ones). The whole cluster is never
degraded. Unhealthy *nodes* are the node filter's (``eligibility.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import IntArray


class DegradedMode(enum.StrEnum):
    """What a new gang does with HyperNodes holding NotReady, cordoned or NoExecute nodes."""

    AVOID = "avoid"  # use them only when no healthy domain of the same tier fits
    EXCLUDE = "exclude"  # never place a new gang in them
    IGNORE = "ignore"  # treat them like any other


EXCLUDED = "degraded"
AVOIDED = "degraded, avoided"


@dataclass(frozen=True, slots=True)
class DegradedDomains(Constraint):
    """Candidacy by domain health (see the module docstring)."""

    name = "health"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # candidacy only: the flat path asks none

    def applies(self, cycle: Cycle) -> bool:
        return cycle.config.degraded is not DegradedMode.IGNORE

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        mode = cycle.config.degraded if ask.new_gang else DegradedMode.IGNORE
        if mode is DegradedMode.IGNORE or tier == cycle.store.layouts.root_tier:
            return None
        degraded = cycle.store.health.degraded_domains(domains)
        n = int(degraded.sum())
        if mode is DegradedMode.EXCLUDE:
            return Candidacy(excluded=~degraded, refusal=Refusal(self, EXCLUDED, n))
        return Candidacy(later=degraded, refusal=Refusal(self, AVOIDED, n))

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if domain is None:
            return f"{refusal.count} degraded HyperNodes ({refusal.what})"
        if refusal.what == EXCLUDED:
            return f"degraded: {store.health.describe(domain)}"
        return f"degraded ({store.health.describe(domain)}), tried after healthy ones"
