"""Whether a PodGroup's topology can be honoured by the HyperNodes at hand.

``tierra validate`` reports these problems for a snapshot and the admission webhook
rejects a PodGroup with them, so a typo in ``highestTierName`` is caught when the
PodGroup is written rather than when its gang sits pending. The scheduler reaches the
same verdict at run time (``constraints.resolve``) and keeps the gang waiting with the
same words; nothing here decides placement.

A topology cannot be honoured when:

* a tier name (``highestTierName``, ``preferredTierName``) names no tier of any usable
  tree (Volcano would silently drop the constraint);
* ``mode: hard`` with ``highestTierAllowed: k`` and no usable HyperNode of tier ``k``
  or lower, while the whole cluster (the virtual root) sits above ``k``: no domain
  could ever hold the gang.

Capacity (a gang bigger than any domain) is not checked: capacity changes with every
pod, and a gang may rightly wait for room.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierra.api.podgroup import NetworkTopology, PodGroup, TopologyMode
from tierra.errors import Problem
from tierra.scheduler.constraints.bounded_wait import wait_problem
from tierra.scheduler.constraints.exclusive import exclusive_problem
from tierra.scheduler.constraints.tier_limit import resolve
from tierra.scheduler.status import Status, unresolvable
from tierra.topology.index import TopologyIndex


def _no_domain(nt: NetworkTopology, index: TopologyIndex, where: str) -> Status | None:
    """``UNRESOLVABLE`` when a hard ``highestTierAllowed`` leaves no usable domain."""
    k = nt.highest_tier_allowed
    if nt.mode is not TopologyMode.HARD or k is None or index.root_tier <= k:
        return None
    if any(int(index.tier[h]) <= k for h in range(index.root) if index.usable[h]):
        return None
    tiers = sorted({int(index.tier[h]) for h in range(index.root) if index.usable[h]})
    shown = ", ".join(map(str, tiers)) if tiers else "none"
    return unresolvable(
        f"{where}.highestTierAllowed {k}: no usable HyperNode has tier {k} or lower "
        f"(usable tiers: {shown}) and the whole cluster is tier {index.root_tier}; "
        "no domain could hold the gang"
    )


def topology_problem(
    nt: NetworkTopology | None, index: TopologyIndex, where: str = "networkTopology"
) -> Status | None:
    """Why ``nt`` cannot be honoured over ``index`` (``UNRESOLVABLE``), or None when it can."""
    if nt is None:
        return None
    limit = resolve(nt, index, where)
    if isinstance(limit, Status):
        return limit
    return _no_domain(nt, index, where)


def podgroup_problems(pg: PodGroup, index: TopologyIndex) -> list[Problem]:
    """Every topology in ``pg`` (its own and each sub-group policy's) that cannot be honoured."""
    out: list[Problem] = []
    found = topology_problem(pg.network_topology, index)
    if found is not None:
        out.append(Problem(found.reason, pg.origin, f"PodGroup/{pg.key}", "spec"))
    for i, policy in enumerate(pg.sub_group_policies):
        found = topology_problem(policy.network_topology, index)
        if found is not None:
            where = f"spec.subGroupPolicy[{i}]"
            out.append(Problem(found.reason, pg.origin, f"PodGroup/{pg.key}", where))
    for refused in (wait_problem(pg, index), exclusive_problem(pg, index)):  # annotations
        if refused is not None:
            out.append(Problem(refused.reason, pg.origin, f"PodGroup/{pg.key}"))
    return out


def all_podgroup_problems(podgroups: Iterable[PodGroup], index: TopologyIndex) -> list[Problem]:
    return [p for pg in podgroups for p in podgroup_problems(pg, index)]
