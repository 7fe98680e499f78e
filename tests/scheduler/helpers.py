"""Helpers shared by the scheduler tests: run a session and read its decisions."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler import (
    ClusterStore,
    Memory,
    SchedulerConfig,
    SessionResult,
    run_session,
    schedule,
)
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


def add(cache: ClusterStore, *objs: Pod | PodGroup) -> None:
    """Feed PodGroups and pods to ``cache`` the way an adapter does, one at a time."""
    for obj in objs:
        if isinstance(obj, PodGroup):
            cache.upsert_podgroup(obj)
        else:
            cache.upsert_pod(obj)


class Scheduler:
    """A cache and the memory beside it, as a long-running adapter keeps them."""

    def __init__(self, cache: ClusterStore, *, skip_unchanged: bool = True) -> None:
        self.cache = cache
        self.memory = Memory(skip_unchanged=skip_unchanged)

    def session(self, config: SchedulerConfig | None = None) -> SessionResult:
        return run_session(self.cache, config, memory=self.memory)


# What only counts events: a trial moves it on, a bulk load ticks it once per batch.
EVENT_COUNTERS = frozenset(
    {"clock", "freed_at", "dom_freed_at", "gang_changed_at", "_healthy", "token"}
)
MEMOS = frozenset({"_links"})  # built from the index on first use, the same every time


def cache_state(cache: ClusterStore) -> dict[str, Any]:
    """Every table and ledger of ``cache`` as plain values, order included (event counters
    and memos left out; inside nested objects, private memos too), for exact comparisons."""
    skip = EVENT_COUNTERS | MEMOS
    return {k: _plain(v, 0) for k, v in vars(cache).items() if k not in skip}


def _plain(value: Any, depth: int) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tolist())
    if isinstance(value, Mapping):
        return ("dict", [(k, _plain(v, depth)) for k, v in value.items()])
    if isinstance(value, set | frozenset):
        return ("set", sorted(map(repr, value)))
    if isinstance(value, list | tuple):
        return tuple(_plain(v, depth) for v in value)
    if value is None or isinstance(value, str | int | float | bool | enum.Enum):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value)]
        return (type(value).__name__, [_plain(getattr(value, f), depth) for f in fields])
    if depth >= 3:
        return type(value).__name__
    attrs = vars(value) if hasattr(value, "__dict__") else {}
    return (
        type(value).__name__,
        [(k, _plain(v, depth + 1)) for k, v in attrs.items() if not k.startswith("_")],
    )
