"""The one outcome type of every placement step: a code, a reason, and what was searched.

Planning a gang, checking its queue, placing it, preempting for it: each step returns a
``Status`` (kube-scheduler's framework ``Status``, absorbed). The code says what the
session does next -- whether a later session may skip the gang until something
changes, and what change can help -- and the reason is the one line a person reads.
A failure found on the placement path carries what was missed as data instead (``why``,
``misses.py``): the reason is made from it afterwards, only for a gang that waits.
A step that produces a value returns either the value or a ``Status`` saying why not.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tierra.scheduler.constraints.tier_limit import TierLimit
    from tierra.scheduler.misses import Why
    from tierra.scheduler.queueing.quota import BudgetRefusal
    from tierra.topology.index import IntArray


class Code(enum.Enum):
    """What an outcome means, and what happens next."""

    SUCCESS = "Success"
    """Placed: the session's transaction holds it; ``Status.domain`` holds its pods."""

    UNSCHEDULABLE = "Unschedulable"
    """Counting alone ruled out every domain it may use. Counts only shrink as room is
    taken, so this repeats until room is freed where it searched (``Status.searched``)
    or the gang, a node, a HyperNode or a queue changes: later sessions skip it."""

    UNRESOLVABLE = "UnschedulableAndUnresolvable"
    """Its input cannot be honoured as it stands (an unknown tier name, a policy that
    forms no sub-groups, pods that cannot make it ready, a missing queue): no freed room
    helps, only a change to the gang or to nodes, HyperNodes or queues."""

    ATTEMPT_FAILED = "AttemptFailed"
    """Some domain's counts said it fits, but node choice there failed (pod shapes
    compete for nodes). A greedy attempt may pass with less room: re-tried every session."""

    QUEUE_LIMITED = "QueueLimited"
    """Its queue may not take it now (capability, guarantee, fair share). Shares move
    with every other queue's gangs: re-tried every session."""

    WAIT = "Wait"
    """It fits nowhere now, but could preempt or reclaim once it has waited the
    preemption delay (kube-scheduler's Wait): re-tried every session."""


@dataclass(frozen=True, slots=True)
class Searched:
    """Where a failed placement looked, and the room a domain must have to pass there.

    ``needs`` rows are amounts a domain's free room must each cover (the gang's whole
    request and its ``minResources`` for a domain search; each shape's request for a
    gang without topology, counted over the region's nodes)."""

    limit: TierLimit
    region: int
    needs: tuple[tuple[int, ...], ...]  # kept as plain numbers: statuses compare by value

    def needs_array(self) -> IntArray:
        return np.array(self.needs, dtype=np.int64).reshape(len(self.needs), -1)


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reason: str = ""
    searched: Searched | None = None
    domain: int | None = None  # SUCCESS: the domain chosen for the gang's required pods
    # SUCCESS: pending pods beyond the minimum its queue's limits kept out, and the first
    # limit that did (worded by ``explain.words.kept_out``)
    kept_out: int = 0
    kept_by: BudgetRefusal | None = None
    # a failure not worded yet: what was missed, as data (``misses.py``); ``reason`` is
    # made from it by ``explain.misses.worded``, only for a gang that waits
    why: Why | None = None

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def must_repeat(self) -> bool:
        """Whether the same input must fail the same way (a later session may skip it)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNRESOLVABLE)


OK = Status(Code.SUCCESS)


def success(domain: int | None) -> Status:
    return Status(Code.SUCCESS, domain=domain)


def unschedulable(reason: str, searched: Searched | None = None) -> Status:
    return Status(Code.UNSCHEDULABLE, reason, searched)


def unresolvable(reason: str) -> Status:
    return Status(Code.UNRESOLVABLE, reason)


def attempt_failed(reason: str) -> Status:
    return Status(Code.ATTEMPT_FAILED, reason)


def queue_limited(reason: str) -> Status:
    return Status(Code.QUEUE_LIMITED, reason)


def wait(reason: str) -> Status:
    return Status(Code.WAIT, reason)
