"""Rank order: pods of a PodSet fill its slots in rank order, as Kueue's ungater does.

Kueue's ``topology_ungater.go`` lists an assignment's domains in order of their level
values (``rankToDomainID``) and gives the pod of rank r the r-th slot; a PodSet whose
pods do not all carry a valid, distinct index (``readRanksForLabels``) fills them in pod
order instead. Placement here counts pods per node; once a gang is placed, ``reserve``
hands the nodes out again: within each rank space (a PodSet, or a leader PodSet and its
workers) and each pod shape (equal requests, so every node's room is unchanged), slots
ordered by the names of the domains above each node, widest first, then the node's name,
taken by rank. Slices were cut in rank order (``kueue_levels``), so a slice keeps its
domain. A pod whose node another constraint fixed this attempt (balanced placement's
leader, on the node Kueue's plan gives the leader PodSet: ``Cycle.data[FIXED]``) keeps
it; the others take the remaining slots. Ranks come from the Kueue index labels or from
the PodGroup's ``topology.tierra.dev/rank-label`` (``tierra.api.kueue``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal

if TYPE_CHECKING:
    from tierra.topology.index import TopologyIndex

FIXED = "rank-order-fixed"  # Cycle.data: pod keys whose node a constraint fixed


def slot_key(ix: TopologyIndex, n: int) -> tuple[str, ...]:
    """Where node ``n``'s slots come in Kueue's order: its domains' names, widest first."""
    doms = [int(d) for d in ix.domains_of(n) if int(d) != ix.root]
    doms.sort(key=lambda d: (-int(ix.tier[d]), ix.names[d]))
    return (*(ix.names[d] for d in doms), ix.node_names[n])


@dataclass(frozen=True, slots=True)
class RankOrder(Constraint):
    """Gives each placed pod of a ranked gang the node its rank's slot is on."""

    name = "rank-order"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # reserves for Kueue's ranks only: a lone pod has none

    def applies(self, cycle: Cycle) -> bool:
        gang = cycle.gang
        return gang is None or (gang.kueue is not None and bool(gang.kueue.ranks))

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        gang = cycle.gang
        shape = gang.kueue if gang is not None else None
        if shape is None or not shape.ranks:
            return None
        ranks = shape.ranks
        fixed = cycle.data.get(FIXED, ())
        wanted = {p.key for p, _ in placed if p.key in ranks and p.key not in fixed}
        if not wanted:
            return None
        assigned = cycle.overlay.assigned
        groups: dict[tuple[str, bytes], list[int]] = {}
        for i in range(len(assigned) - 1, -1, -1):
            pod, _, vec = assigned[i]
            if pod.key in wanted:
                groups.setdefault((ranks[pod.key][0], vec.tobytes()), []).append(i)
                wanted.discard(pod.key)
                if not wanted:
                    break
        ix = cycle.store.index
        for rows in groups.values():
            pods = sorted((assigned[i][0] for i in rows), key=lambda p: ranks[p.key][1])
            nodes = sorted((assigned[i][1] for i in rows), key=lambda n: slot_key(ix, n))
            rows.sort()
            for i, pod, n in zip(rows, pods, nodes, strict=True):
                assigned[i] = (pod, n, assigned[i][2])
        return None
