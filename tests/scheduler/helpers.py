"""Helpers shared by the scheduler tests: run a session and read its decisions."""

from __future__ import annotations

from collections.abc import Sequence

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler import Cache, Memory, SchedulerConfig, SessionResult, run_session, schedule
from tierra.scheduler.testing import snapshot


def run(
    nodes: Sequence[Node],
    hypernodes: Sequence[HyperNode] = (),
    pods: Sequence[Pod] = (),
    podgroups: Sequence[PodGroup] = (),
    *,
    queues: Sequence[Queue] = (),
    config: SchedulerConfig | None = None,
) -> SessionResult:
    return schedule(snapshot(nodes, hypernodes, pods, podgroups, queues), config)


def placed(result: SessionResult) -> dict[str, str]:
    """pod key -> node name."""
    return {b.pod: b.node for b in result.bindings}


def domains(result: SessionResult) -> dict[str, str | None]:
    """pod key -> the hyperNode its gang occupies."""
    return {b.pod: b.hypernode for b in result.bindings}


def reasons(result: SessionResult) -> dict[str, str]:
    return {u.podgroup: u.reason for u in result.unschedulable}


def add(cache: Cache, *objs: Pod | PodGroup) -> None:
    """Feed PodGroups and pods to ``cache`` the way an adapter does, one at a time."""
    for obj in objs:
        if isinstance(obj, PodGroup):
            cache.upsert_podgroup(obj)
        else:
            cache.upsert_pod(obj)


class Scheduler:
    """A cache and the memory beside it, as a long-running adapter keeps them."""

    def __init__(self, cache: Cache, *, skip_unchanged: bool = True) -> None:
        self.cache = cache
        self.memory = Memory(skip_unchanged=skip_unchanged)

    def session(self, config: SchedulerConfig | None = None) -> SessionResult:
        return run_session(self.cache, config, memory=self.memory)
