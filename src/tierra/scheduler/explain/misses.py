"""Words for what a failed step missed (``misses.py``), made after the step, not inside it.

The session words a gang's status once it is known to wait (``worded``), and explain
words the attempts it traces; a gang that is placed is never worded. Each record is
worded as the step that made it would have said it at the time (the search's misses
carry their numbers; the rest reads what does not change during a session).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from tierra.scheduler.explain.reasons import amount, domain_name, no_fit_reason
from tierra.scheduler.explain.words import kept_out
from tierra.scheduler.misses import (
    Apart,
    BestTry,
    Beyond,
    GangProblem,
    KeptOut,
    Missing,
    NoFit,
    Reserved,
    ShareHeld,
    Spans,
    Why,
    Within,
)

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore
    from tierra.scheduler.status import Status


def worded(status: Status, store: ClusterStore) -> Status:
    """``status`` with its reason made from what it missed (unchanged without one)."""
    if status.why is None:
        return status
    return replace(status, reason=words(status.why, store), why=None)


def words(why: Why, store: ClusterStore) -> str:
    """The sentence for ``why`` (see ``misses.py`` for what each record means)."""
    if isinstance(why, str):
        return why
    if isinstance(why, NoFit):
        misses = list(why.misses)
        return no_fit_reason(
            store, why.demand, why.limit, misses, region=why.region, sticky=why.sticky
        )
    if isinstance(why, Within):
        where = why.where if isinstance(why.where, str) else f"in {domain_name(store, why.where)}"
        return f"{where}: {words(why.why, store)}"
    if isinstance(why, BestTry):
        return (
            f"no allowed domain holds the gang ({why.limit.text}); "
            f"best try {words(why.tried, store)}"
        )
    if isinstance(why, Reserved):
        return why.refusal.words(store, why.domain)
    if isinstance(why, Missing):
        return f"only {missing(why)}"
    if isinstance(why, Spans):
        return f"its pods already span {domain_name(store, why.domain)}"
    if isinstance(why, Apart):
        return (
            f"its pods run in {domain_name(store, why.top)} ({why.limit.text}), "
            f"which does not overlap {domain_name(store, why.outer)}"
        )
    if isinstance(why, KeptOut):
        return kept_out(why.count, why.by, why.minimum)
    if isinstance(why, ShareHeld):
        return share_held(why, store)
    if isinstance(why, Beyond):
        n = why.count
        pods = f"{n} pending pod{'s' if n != 1 else ''}"
        return f"{pods} beyond {why.minimum}: {words(why.why, store)}"
    return gang_problem(why)


def share_held(s: ShareHeld, store: ClusterStore) -> str:
    """Why a queue may not reclaim: it deserves none, or holds its share already."""
    axis = store.capacity.axis
    if s.held is None:
        return f"queue {s.queue} deserves none of {', '.join(axis.names[i] for i in s.resources)}"
    i, (deserved, in_use) = s.resources[0], s.held
    return (
        f"queue {s.queue} holds its deserved share of {axis.names[i]} already (deserved "
        f"{amount(axis, i, deserved)}, in use {amount(axis, i, in_use)})"
    )


def missing(m: Missing) -> str:
    """What keeps a gang from being ready, as its rule says it."""
    if m.rule == "minTaskMember":
        return f"task {m.name}: {m.have} of minTaskMember {m.need} pods"
    if m.rule == "minSubGroups":
        return f"policy {m.name}: {m.have} of minSubGroups {m.need} sub-groups"
    return f"{m.have} of {m.name or 'minMember'} {m.need} pods"


def _no_queue(p: GangProblem) -> str:
    return f"queue {p.value('queue')!r} does not exist (queues: {p.value('known')})"


def _queue_state(p: GangProblem) -> str:
    return f"queue {p.value('queue')!r} is {p.value('state')}"


def _no_match_label_keys(p: GangProblem) -> str:
    return (
        f"spec.subGroupPolicy[{p.value('index')}] ({p.value('policy')}) has no matchLabelKeys, "
        "so it forms no sub-groups (Volcano ignores it silently); set matchLabelKeys, "
        "e.g. [volcano.sh/partition-id]"
    )


def _min_member(p: GangProblem) -> str:
    total, pending, running = p.value("total"), p.value("pending"), p.value("running")
    gated = p.value("gated")
    held = f", {gated} more held by schedulingGates" if gated else ""
    return (
        f"{p.value('field')} is {p.value('minMember')} but the gang has only {total} "
        f"pod{'s' if total != 1 else ''} ({pending} pending, {running} running{held})"
    )


def _min_task_member(p: GangProblem) -> str:
    task = p.value("task")
    need, have = p.value("need"), p.value("have")
    return f"minTaskMember[{task}] is {need} but task {task} has only {have} pods"


def _two_cuts(p: GangProblem) -> str:
    return (
        "spec.subGroupPolicy and Kueue's slice or per-PodSet topology annotations "
        "both cut the gang into sub-groups; use one of them"
    )


def _min_sub_groups(p: GangProblem) -> str:
    return (
        f"subGroupPolicy {p.value('policy')} needs minSubGroups {p.value('need')} but its pods "
        f"form only {p.value('formed')} sub-groups"
    )


GANG_PROBLEMS: dict[str, Callable[[GangProblem], str]] = {
    "no queue": _no_queue,
    "queue state": _queue_state,
    "no matchLabelKeys": _no_match_label_keys,
    "minMember": _min_member,
    "minTaskMember": _min_task_member,
    "two cuts": _two_cuts,
    "minSubGroups": _min_sub_groups,
}


def gang_problem(p: GangProblem) -> str:
    """Why a gang's input cannot be honoured, in the words ``tierra validate`` also uses."""
    return GANG_PROBLEMS[p.what](p)
