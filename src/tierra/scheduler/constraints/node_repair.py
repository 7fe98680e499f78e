"""Node repair (Kueue's ``TASFailedNodeReplacement`` / ``TASReplaceNodeOnNodeTaints``):
replacement pods of a running gang go beside its surviving pods, on purpose.

When a node under a running gang fails (NotReady, deleted, or tainted ``NoExecute`` /
``NoSchedule`` against its pods), the node filter takes it out for new pods, and the job
controller recreates the lost pods. Those are pending pods of a gang whose other pods
run: this constraint lets the search consider only domains holding the survivors (the
frame's ``sticky``, the lowest domain over the running pods): the survivors' own domain
first, and when it has no room, the smallest domain above it that has (the lowest tier
first) -- always within the gang's hard limit, which bounds the search region. When none
has room the gang waits, with this constraint's words in its reason. A gang with
sub-group policies is left to their own rule (each sub-group stays where its running
pods are, ``plan.Unit.sticky``). The PodGroup's condition records a repair once the
replacements are bound (``repair_note``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import IntArray, TopologyIndex

APART = "apart from its running pods"


@dataclass(frozen=True, slots=True)
class NodeRepair(Constraint):
    """Candidacy for a running gang's new pods (see the module docstring)."""

    name = "node-repair"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # candidacy only: the flat path asks none

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        sticky, gang = ask.sticky, cycle.gang
        if sticky is None or gang is None:
            return None
        if gang.podgroup is not None and gang.podgroup.sub_group_policies:
            return None  # sub-groups keep to their own running pods' domains (plan.Unit)
        lay = cycle.store.layouts
        at = lay.tin[sticky]
        holds = (lay.tin[domains] <= at) & (at < lay.tout[domains])  # itself or above it
        if holds.all():
            return None
        refusal = Refusal(self, APART, int((~holds).sum()), (("domain", int(sticky)),))
        return Candidacy(allowed=np.asarray(holds, dtype=bool), refusal=refusal)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        h = refusal.value("domain")
        where = store.index.names[int(h)] if isinstance(h, int) else "its domain"
        return (
            f"new pods of a running gang go beside its running pods: only {where} or a "
            f"domain above it (node repair)"
        )


def repair_note(
    index: TopologyIndex, hypernode: str | None, replaced: int, running: int
) -> str | None:
    """For the PodGroup condition: ``replaced`` pods bound beside ``running`` survivors."""
    if replaced <= 0 or running <= 0:
        return None
    where = hypernode if hypernode and hypernode in index.ix else "the cluster"
    return f"repaired: {replaced} replacement pods bound beside {running} running, within {where}"
