"""What a session would refuse however much room frees, worded as the session words it.

A snapshot can be readable and still hold gangs no session will ever place as written: a
pod naming a PodGroup that does not exist, a PodGroup naming a missing queue, minMember
above its pods, a tier name no tree has, a pod requesting a resource no node offers, a
gang too big for every domain its limit allows even with every node empty. ``tierra
validate`` reports these so the user hears of them before submitting, not from a gang
that waits forever. All are errors except size, a warning: nodes can be added.

``refusals`` runs the session's own steps that do not depend on free room (``collect``
for gangs and orphans, ``Placer.frame`` for limits, ``Placer.split`` and ``demand`` for
requests, ``never_fits`` for size) and returns their reasons unchanged, so ``validate``
and ``schedule`` cannot disagree on them. Unlike a session, which gives each gang its
first reason, every reason is listed. One check is added that a session cannot word: a
hard limit below every usable tier (``topology_checks``), and PodGroups without pending
pods are checked for their limits too (a typo is caught before the pods exist).
"""

from __future__ import annotations

from tierra.api.pod import Pod
from tierra.errors import Origin, Problem, Severity
from tierra.scheduler.cache import Cache, gang_key
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.explain import never_fits
from tierra.scheduler.gang import Gang, collect
from tierra.scheduler.memory import Memory
from tierra.scheduler.placer import Placer
from tierra.scheduler.topology_checks import podgroup_problems, topology_problem
from tierra.scheduler.transaction import Transaction


def refusals(cache: Cache, config: SchedulerConfig) -> list[Problem]:
    """Every reason a session over ``cache`` would refuse a gang whatever room is free.

    Each is a ``Problem`` on the PodGroup (or, for a pod without one, the Pod) it is
    about, located where that object was read.
    """
    gangs, orphans = collect(cache, config.scheduler_names, Memory())
    placer = Placer(cache, config, Transaction(cache.capacity))
    out: list[Problem] = []
    for orphan in orphans:
        pod = _first_pod(cache, orphan.podgroup)
        out.append(
            Problem(orphan.reason, pod.origin if pod else None, f"Pod/{pod.key}" if pod else "")
        )
    for gang in gangs:
        origin, obj = _where(gang)
        for reason, severity in _reasons(placer, gang):
            out.append(Problem(reason, origin, obj, severity=severity))
    waiting = {g.key for g in gangs}
    for key, pg in sorted(cache.podgroups.items()):
        if key not in waiting:  # no pending pods: only its limits can be judged yet
            out.extend(podgroup_problems(pg, cache.index))
    return out


def _reasons(placer: Placer, gang: Gang) -> list[tuple[str, Severity]]:
    """The gang's refusals: errors in what it says, and a warning when it is too big.

    Too big for every allowed domain even empty is a warning: nodes can be added.
    """
    out = [(gang.problem, Severity.ERROR)] if gang.problem is not None else []
    frame = placer.frame(gang)
    if isinstance(frame, str):
        return [*out, (frame, Severity.ERROR)]
    no_domain = topology_problem(gang.topology, placer.state.index, "spec.networkTopology")
    if no_domain is not None:
        return [*out, (no_domain, Severity.ERROR)]
    if gang.problem is not None:
        return out  # the pods it would place are not known while the gang is inconsistent
    core, _ = placer.split(gang)
    if core is None:
        return out
    demand = placer.demand([p for _, pods in core for p in pods])
    if isinstance(demand, str):
        return [*out, (demand, Severity.ERROR)]
    if demand.count and frame.sticky is None:
        never = never_fits(placer.state, demand, frame.limit, frame.region)
        if never is not None:
            out.append((never, Severity.WARNING))
    return out


def _where(gang: Gang) -> tuple[Origin | None, str]:
    if gang.podgroup is not None:
        return gang.podgroup.origin, f"PodGroup/{gang.key}"
    pod = gang.pending[0]
    return pod.origin, f"Pod/{pod.key}"


def _first_pod(cache: Cache, group: str) -> Pod | None:
    named = sorted(
        (p for p in cache.pods.values() if gang_key(p) == group and not p.bound),
        key=lambda p: p.key,
    )
    return named[0] if named else None
