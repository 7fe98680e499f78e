"""What a session would refuse however much room frees, worded as the session words it.

A snapshot can be readable and still hold gangs no session will ever place as written: a
pod naming a PodGroup that does not exist, a PodGroup naming a missing queue, minMember
above its pods, a tier name no tree has, a pod requesting a resource no node offers, a
gang too big for every domain its limit allows even with every node empty. ``tierra
validate`` reports these so the user hears of them before submitting, not from a gang
that waits forever. All are errors except size, a warning: nodes can be added.

``refusals`` asks the session's own planning step, ``plan.make_plan`` (limits, frame,
the pods that go together, their demand: any of which ends the plan with an
``UNRESOLVABLE`` status), and ``explain.never_fits`` on the plan it returns; their
reasons come back unchanged, so ``validate`` and ``schedule`` cannot disagree on them.
A session stops at a gang's first reason; this adds what ``make_plan`` cannot reach
once the gang's own input is inconsistent (an unknown tier name beside a missing
queue), a hard limit below every usable tier (``topology_checks``), and for PodGroups
with no pending pods their limits and, with no pods yet, whether ``minMember`` pods and
``minResources`` could ever fit (``podgroup_refusals``: a typo or an oversized gang is
caught before the pods exist).
"""

from __future__ import annotations

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.errors import Origin, Problem, Severity
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.constraints.bounded_wait import wait_problem
from tierra.scheduler.constraints.exclusive import exclusive_problem
from tierra.scheduler.constraints.tier_limit import resolve
from tierra.scheduler.explain.misses import worded
from tierra.scheduler.explain.reasons import never_fits, podgroup_never_fits
from tierra.scheduler.explain.topology_checks import podgroup_problems, topology_problem
from tierra.scheduler.gang import Gang, collect
from tierra.scheduler.kueue_pod_groups import MADE_FROM
from tierra.scheduler.placement.demand import Demands
from tierra.scheduler.placement.plan import make_plan
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.store import ClusterStore, gang_key
from tierra.scheduler.status import Status


def refusals(cache: ClusterStore, config: SchedulerConfig) -> list[Problem]:
    """Every reason a session over ``cache`` would refuse a gang whatever room is free.

    Each is a ``Problem`` on the PodGroup (or, for a pod without one, the Pod) it is
    about, located where that object was read.
    """
    gangs, orphans = collect(cache, config.scheduler_names, Memory())
    demands = Demands(cache)
    out: list[Problem] = []
    for orphan in orphans:
        pod = _first_pod(cache, orphan.podgroup)
        out.append(
            Problem(orphan.reason, pod.origin if pod else None, f"Pod/{pod.key}" if pod else "")
        )
    for gang in gangs:
        origin, obj = _where(gang)
        for reason, severity in _reasons(cache, demands, gang):
            out.append(Problem(reason, origin, obj, severity=severity))
    waiting = {g.key for g in gangs}
    for key, pg in sorted(cache.podgroups.items()):
        if key not in waiting:  # no pending pods: only its own fields can be judged yet
            out.extend(podgroup_refusals(cache, pg, pods=bool(cache.members.get(key))))
    return out


def podgroup_refusals(cache: ClusterStore, pg: PodGroup, *, pods: bool = False) -> list[Problem]:
    """What a PodGroup with no pending pods says that cannot be honoured: its limits
    (errors) and, if it has no pods at all (``pods`` False), a minimum that no allowed
    domain could hold even empty (a warning: nodes can be added). The admission webhook
    asks the same of a PodGroup being written, so both say the same words."""
    out = podgroup_problems(pg, cache.index)
    if not out and not pods:
        never = podgroup_never_fits(cache, pg)
        if never is not None:
            out.append(Problem(never, pg.origin, f"PodGroup/{pg.key}", severity=Severity.WARNING))
    return out


def _reasons(cache: ClusterStore, demands: Demands, gang: Gang) -> list[tuple[str, Severity]]:
    """The gang's refusals: errors in what it says, and a warning when it is too big."""
    for why in (
        wait_problem(gang.podgroup, cache.index),
        exclusive_problem(gang.podgroup, cache.index),
    ):
        if why is not None:  # annotations the plan does not read
            return [(why.reason, Severity.ERROR)]
    plan = make_plan(cache, gang, demands)
    if isinstance(plan, Status):
        out = [(worded(plan, cache).reason, Severity.ERROR)]
        if gang.problem is not None:  # the plan stopped there: its limit is still judged
            limit = resolve(gang.topology, cache.index, gang.api.topology, gang.api)
            if isinstance(limit, Status):
                out.append((limit.reason, Severity.ERROR))
        return out
    frame = plan.frame
    no_domain = topology_problem(gang.topology, cache.index, gang.api.topology)
    if no_domain is not None:
        return [(no_domain.reason, Severity.ERROR)]
    if plan.demand.count and frame.sticky is None:
        never = never_fits(cache, plan.demand, frame.limit, frame.region)
        if never is not None:  # a warning: nodes can be added
            return [(never, Severity.WARNING)]
    return []


def _where(gang: Gang) -> tuple[Origin | None, str]:
    if gang.podgroup is not None and MADE_FROM not in gang.podgroup.meta.annotations:
        return gang.podgroup.origin, f"PodGroup/{gang.key}"  # (not one made for Kueue's pods)
    pod = gang.pending[0]
    return pod.origin, f"Pod/{pod.key}"


def _first_pod(cache: ClusterStore, group: str) -> Pod | None:
    named = sorted(
        (p for p in cache.pods.values() if gang_key(p) == group and not p.bound),
        key=lambda p: p.key,
    )
    return named[0] if named else None
