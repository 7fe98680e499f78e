"""The session's sentences: what eviction did or would do, what a queue kept out, and the
summary explain prints for a gang. Made from the values the steps return (an
``EvictionCause``, a ``Status`` with ``kept_out``), after the step, never inside the
search; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tierra.api.natural import natural_key
from tierra.scheduler.explain.reasons import domain_name

if TYPE_CHECKING:
    from tierra.scheduler.queueing.queues import QueueBook
    from tierra.scheduler.queueing.quota import BudgetRefusal
    from tierra.scheduler.result import Binding, Eviction, EvictionCause
    from tierra.scheduler.state.store import ClusterStore
    from tierra.scheduler.status import Status

NOTHING_TO_EVICT = {
    "preempt": "no allowed domain frees enough room by evicting lower-priority pods",
    "reclaim": "no allowed domain frees enough room by evicting whole gangs of queues above "
    "their shares without taking one below its share or leaving it poorer than this queue",
}
NO_RICHER_QUEUE = "no other queue holds more than its share of what it asks for"


def waiting(placement: str, delay: str) -> str:
    """Why a gang that could evict later waits now: where it does not fit, and the delay."""
    return f"{placement}; {delay}"


def reclaim_impossible(why: str) -> str:
    return f"reclaim: not possible, {why}"


def nothing_to_evict(kind: str) -> str:
    return f"{kind}: tried, {NOTHING_TO_EVICT[kind]}"


def not_pending(key: str, *, known: bool) -> str:
    """Explain for a key that no waiting gang has."""
    if known:
        return f"{key} has no pending pods of this scheduler"
    return f"no PodGroup or pod {key} in the snapshot"


def kept_out(n: int, by: BudgetRefusal, minimum: str = "minMember") -> str:
    """``3 pending pods beyond minMember wait: <the first limit that kept them out>``
    (``minimum``: the field as the PodGroup's own API names it, ``PodGroupApi``)."""
    pods = (
        f"1 pending pod beyond {minimum} waits"
        if n == 1
        else f"{n} pending pods beyond {minimum} wait"
    )
    return f"{pods}: {by.words()}"


def delay_note(kinds: Sequence[str], left: float, delay: float) -> str:
    """Why a gang that could evict waits: the preemption delay has not passed."""
    return (
        f"it may {' or '.join(kinds)} once it has waited the preemption delay "
        f"({left:.0f} s of {delay:g} s left)"
    )


def eviction_reason(store: ClusterStore, cause: EvictionCause, book: QueueBook) -> str:
    """The reason each victim of ``cause`` is given (``Eviction.reason``)."""
    where = domain_name(store, cause.domain)
    if cause.kind == "preempt":
        return f"preempted by {cause.by} (priority {cause.priority}) to make room in {where}"
    i = cause.resource
    givers = sorted(set(cause.givers), key=natural_key)
    return (
        f"reclaimed by {cause.by} to make room in {where}: "
        f"{book.share_text(cause.queue, i)} is below its share, "
        + ", ".join(book.share_text(v, i) for v in givers)
        + (" is" if len(givers) == 1 else " are")
        + " above"
    )


def would_evict(
    store: ClusterStore, kind: str, victims: Sequence[tuple[str, int]], why: str, left: float
) -> str:
    """Explain: what evicting would take now, once the delay has passed."""
    names = ", ".join(f"{key} on {store.index.node_names[node]}" for key, node in victims)
    return (
        f"{kind}: would evict {names} ({why}) once the preemption delay has passed "
        f"({left:.0f} s left)"
    )


def scheduled_summary(
    gang: str,
    pending: int,
    bound: Sequence[Binding],
    evictions: Sequence[Eviction],
    status: Status,
    *,
    minimum: str = "minMember",
) -> str:
    """Explain's one line for a gang that was placed."""
    where = bound[0].hypernode if bound and bound[0].hypernode else "the whole cluster"
    preempted = [e for e in evictions if e.by == gang and e.kind == "preempt"]
    reclaimed = [e for e in evictions if e.by == gang and e.kind == "reclaim"]
    summary = f"{len(bound)} of {pending} pending pods bound, within {where}"
    if preempted:
        summary += f", after evicting {len(preempted)} lower-priority pods"
    if reclaimed:
        n = len(reclaimed)
        summary += f", after reclaiming {n} pod{'s' if n != 1 else ''}: {reclaimed[0].reason}"
    if status.kept_by is not None:  # members beyond the minimum its queue keeps out
        summary += f"; {kept_out(status.kept_out, status.kept_by, minimum)}"
    return summary
