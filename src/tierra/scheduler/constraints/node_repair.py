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

A ``NoExecute`` taint the pods tolerate only for a while (``tolerationSeconds``) counts
as a failed node for replacements, as Kueue counts a temporarily tolerated taint
(``node_controller.go`` ``checkTaintTolerations``): the node takes none of them (a node
cap of 0), else a replacement would be put back where the taint evicts it again
(hotswap_test "Should replace a node when it becomes tainted with NoExecute and
tolerationSeconds"). New gangs are placed as kube-scheduler places them: a tolerated
taint is tolerated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.node import Taint, TaintEffect
from tierra.scheduler.constraints.protocol import Ask, Candidacy, Constraint, Cycle, Refusal

if TYPE_CHECKING:
    from tierra.api.pod import Pod
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import IntArray, TopologyIndex

APART = "apart from its running pods"
TEMPORARY = "tolerated for a while"


def _for_a_while(pod: Pod, taint: Taint) -> bool:
    """Whether ``taint`` is NoExecute and the pod tolerates it only with tolerationSeconds."""
    if taint.effect is not TaintEffect.NO_EXECUTE:
        return False
    fits = [t for t in pod.tolerations if t.tolerates(taint)]
    return bool(fits) and all(t.seconds is not None for t in fits)


@dataclass(frozen=True, slots=True)
class NodeRepair(Constraint):
    """Candidacy for a running gang's new pods (see the module docstring)."""

    name = "node-repair"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # candidacy only: the flat path asks none

    def applies(self, cycle: Cycle) -> bool:
        """For a gang with running pods (its caps, its candidacy) or, without sub-group
        policies, with pods beyond its minimum: those extras are searched near the pods
        just placed (a ``sticky`` ask) although none runs yet."""
        gang = cycle.gang
        if gang is None or gang.running:
            return True
        pg = gang.podgroup
        if pg is not None and pg.sub_group_policies:
            return False  # candidacy says nothing to sub-groups; caps need running pods
        return len(gang.pending) > gang.min_member

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

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        gang = cycle.gang
        if gang is None or not gang.running or not shape.pods:
            return None
        pod = shape.pods[0]
        if not any(t.seconds is not None for t in pod.tolerations):
            return None
        all_nodes = cycle.store.nodes
        caps = np.full(len(nodes), np.iinfo(np.int64).max, dtype=np.int64)
        for i, n in enumerate(nodes.tolist()):
            if any(_for_a_while(pod, t) for t in all_nodes[n].taints):
                caps[i] = 0
        return caps

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, TEMPORARY, capped)

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what == TEMPORARY:
            return (
                f"{refusal.count} node(s) carry a NoExecute taint the pods tolerate only for "
                "a while (tolerationSeconds): no place for replacements (node repair)"
            )
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
