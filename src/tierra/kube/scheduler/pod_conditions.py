"""Pending gangs autoscalers can see: ``PodScheduled=False`` on every pod of a waiting gang.

cluster-autoscaler and Karpenter decide a scale-up from pods whose ``status.conditions``
hold ``PodScheduled`` ``False`` with reason ``Unschedulable``; a pod that only says
``phase: Pending`` is invisible to them. kube-scheduler writes that condition in
``handleSchedulingFailure`` (pkg/scheduler/schedule_one.go): reason ``Unschedulable``,
the fit error as message (cut to 1024 bytes with `` ...``), ``lastTransitionTime`` now
when the status changes and kept when only the message does, no ``lastProbeTime``, as a
strategic merge patch on ``pods/{name}/status`` sent only when the condition differs
from the pod's. tierra does the same for every pending pod of a gang the session left
waiting, with the gang's reason as message.

Nothing clears it here: the API server's ``pods/{name}/binding`` sets ``PodScheduled``
``True`` (and drops reason and message) as it binds, for the binder's bindings as for
kube-scheduler's.

Reason ``Unschedulable`` is what cluster-autoscaler and Karpenter scale up for, so it is
kept for gangs more nodes can help (codes ``Unschedulable`` and ``AttemptFailed``). A gang
its queue holds back (``QueueLimited``) or whose input cannot be honoured
(``UnschedulableAndUnresolvable``: an unknown tier name, a missing queue) gets the same
condition with its code as reason: pending and explained, but no scale-up for it (with
Kueue such a Job would be suspended, its pods never created).

Written only when it changes: what the pod has is read from the informer
(``Feed.unschedulable``), so a gang that waits for hours with the same reason costs one
write per pod, across sessions and across restarts; a gang whose reason changes is
rewritten at most once per ``interval``. A gang with fewer pods than its minimum gets
nothing: kube-scheduler's gang plugin holds such pods before the queue (PreEnqueue)
without a condition, and an autoscaler must not add nodes for half a gang.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from tierra.kube import resources as r
from tierra.kube.client import STRATEGIC_PATCH, ApiError, Kube
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.scheduler.status import flush_when_dirty
from tierra.scheduler.result import SessionResult
from tierra.scheduler.status import Code

log = logging.getLogger(__name__)
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"
NOTE_LENGTH_LIMIT = 1024  # validation.NoteLengthLimit, kube-scheduler's truncateMessage
NODES_MAY_HELP = (Code.UNSCHEDULABLE, Code.ATTEMPT_FAILED)


def reason_for(code: Code) -> str:
    """``Unschedulable`` (autoscalers act on it) when more nodes may help, else the code."""
    return UNSCHEDULABLE if code in NODES_MAY_HELP else code.value


def truncate(message: str) -> str:
    """The message as kube-scheduler cuts it (bytes of UTF-8, kept valid)."""
    data = message.encode()
    if len(data) <= NOTE_LENGTH_LIMIT:
        return message
    suffix = " ..."
    return data[: NOTE_LENGTH_LIMIT - len(suffix)].decode(errors="ignore") + suffix


def condition_patch(
    message: str, *, transition: bool, uid: str = "", reason: str = UNSCHEDULABLE
) -> dict[str, Any]:
    """The strategic merge patch kube-scheduler's ``updatePod`` sends for a failure:
    conditions merge by type, so leaving ``lastTransitionTime`` out keeps the pod's."""
    cond: dict[str, Any] = {
        "type": POD_SCHEDULED,
        "status": "False",
        "reason": reason,
        "message": message,
        "lastProbeTime": None,
    }
    if transition:
        cond["lastTransitionTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch: dict[str, Any] = {"status": {"conditions": [cond]}}
    if uid:  # a precondition: a pod re-created under the name is not written
        patch["metadata"] = {"uid": uid}
    return patch


class PodConditionWriter:
    def __init__(
        self,
        kube: Kube,
        feed: Feed,
        metrics: Metrics,
        *,
        interval: float = 5.0,
        concurrency: int = 16,
    ) -> None:
        self.kube = kube
        self.feed = feed
        self.metrics = metrics
        self.interval = interval
        self.writes = 0
        self._limit = asyncio.Semaphore(concurrency)
        self._due: dict[str, tuple[str, str, str]] = {}  # pod key -> (gang, reason, message)
        self._last: dict[str, float] = {}  # gang -> when its pods were last written
        self._dirty = asyncio.Event()

    def observe(self, result: SessionResult) -> None:
        """Note the pods of each gang ``result`` left waiting (call in the event loop)."""
        cache = self.feed.cache
        waiting = {
            u.podgroup: (reason_for(u.status.code), truncate(u.reason))
            for u in result.unschedulable
        }
        self._due = {k: v for k, v in self._due.items() if v[0] in waiting}
        for gang, (reason, message) in waiting.items():
            members = cache.members.get(gang)
            keys = list(members) if members else [gang]  # a pod without a PodGroup
            pg = cache.podgroups.get(gang)
            if members and pg is not None and len(members) < pg.min_member:
                continue
            want = ("False", reason, message)
            for key in keys:
                pod = cache.pods.get(key)
                if (
                    pod is None
                    or pod.bound
                    or key in cache.assumed
                    or pod.scheduler_name not in self.feed.scheduler_names
                    or self.feed.unschedulable.get(key) == want
                ):
                    self._due.pop(key, None)
                    continue
                self._due[key] = (gang, reason, message)
        self._last = {g: t for g, t in self._last.items() if g in waiting}
        if self._due:
            self._dirty.set()

    async def run(self) -> None:
        await flush_when_dirty(self._dirty, self.flush)

    async def flush(self, *, force: bool = False) -> float | None:
        """Write what is due; the seconds until the rest is due (None: nothing left)."""
        now = time.monotonic()
        ready: list[tuple[str, str, str, str]] = []
        soonest: float | None = None
        for key, (gang, reason, message) in list(self._due.items()):
            due = self._last.get(gang, -1e18) + self.interval - now
            if due > 0 and not force:
                soonest = due if soonest is None else min(soonest, due)
                continue
            ready.append((key, gang, reason, message))
        for _, gang, _, _ in ready:
            self._last[gang] = now
        await asyncio.gather(
            *(self._write(key, reason, message) for key, _, reason, message in ready)
        )
        return soonest

    async def _write(self, key: str, reason: str, message: str) -> None:
        self._due.pop(key, None)
        pod = self.feed.cache.pods.get(key)
        if pod is None or pod.bound or key in self.feed.cache.assumed:
            return
        had = self.feed.unschedulable.get(key)
        want = ("False", reason, message)
        if had == want:
            return
        namespace, _, name = key.partition("/")
        async with self._limit:
            try:
                await self.kube.request(
                    "PATCH",
                    r.PODS.path(namespace, name, "status"),
                    body=condition_patch(
                        message, transition=had is None, uid=pod.meta.uid, reason=reason
                    ),
                    content_type=STRATEGIC_PATCH,
                    what=f"set PodScheduled=False on Pod {key}",
                )
            except ApiError as exc:
                if exc.status not in (404, 409):  # gone, or re-created: nothing to say
                    log.warning("%s", exc)
                return
        self.writes += 1
        self.metrics.pod_condition_writes.inc()
        self.feed.unschedulable[key] = want  # the watch will say the same
