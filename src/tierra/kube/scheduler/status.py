"""Tell users what happened: PodGroup status and Events with the explain reason.

After each session the writer works out, per gang it decided about, what its PodGroup's
status should say; a background task writes what differs from what it last wrote, at most
once per ``interval`` per group (a gang waiting for hours costs one write, not one per
session). Two shapes:

* Volcano's PodGroup (``scheduling.volcano.sh/v1beta1``, a merge patch on ``/status``):
  ``phase`` (Pending, Running, Completed), ``running`` (pods bound and not finished:
  on a cluster without kubelets bound pods never leave Pending), ``succeeded``,
  ``failed``, and one condition, ``Unschedulable`` with the reason or ``Scheduled``.
* the upstream PodGroup (``scheduling.k8s.io/v1alpha2``, a strategic merge on the
  conditions by type): the KEP's ``PodGroupScheduled`` condition, ``False`` with reason
  ``Unschedulable`` and the explanation, or ``True`` once its pods are bound.

Events go through the rate-limited ``EventRecorder``: ``Unschedulable`` on the PodGroup
and ``FailedScheduling`` on each of its pending pods with the same message; ``Scheduled``
on the PodGroup (on the pod, for a pod without one) when bound, with what else is true
of the binding (a bounded wait met or run out, replacements beside survivors, the nodes
cluster-autoscaler brought up for its ProvisioningRequest). A gang with fewer pods
than its minimum gets status but no Events: while a job controller creates its pods the
reason changes with every pod, and would be an Event per pod for nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tierra.api.pod import Phase
from tierra.api.workload import SCHEDULED, UNSCHEDULABLE
from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, STRATEGIC_PATCH, ApiError, Kube
from tierra.kube.events import NORMAL, WARNING, EventRecorder, ObjectRef
from tierra.kube.scheduler.feed import Feed
from tierra.scheduler.constraints.bounded_wait import wait_outcome
from tierra.scheduler.constraints.node_repair import repair_note
from tierra.scheduler.result import Binding, SessionResult

log = logging.getLogger(__name__)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Group:
    resource: r.Resource
    desired: dict[str, Any]
    written: dict[str, Any] | None = None
    written_at: float = -1e18
    state: tuple[str, str] = ("", "")  # the condition's (type, status) last written
    since: str = ""  # ... and when it took that state


async def flush_when_dirty(
    dirty: asyncio.Event, flush: Callable[[], Awaitable[float | None]]
) -> None:
    """A writer's loop: flush whenever something is due; when ``flush`` says the rest is
    due in N seconds (rate limits), come back then."""
    while True:
        await dirty.wait()
        dirty.clear()
        wait = await flush()
        if wait is not None:
            await asyncio.sleep(wait)
            dirty.set()


class StatusWriter:
    def __init__(
        self, kube: Kube, feed: Feed, recorder: EventRecorder, *, interval: float = 5.0
    ) -> None:
        self.kube = kube
        self.feed = feed
        self.recorder = recorder
        self.interval = interval
        self.writes = 0
        self._groups: dict[str, _Group] = {}
        self._dirty = asyncio.Event()
        # what else a waiting gang's condition says: cluster-autoscaler's word on its
        # ProvisioningRequest (``AutoscalerSignals.note``); and each gang's last reason
        self.notes: Callable[[str], str | None] = lambda gang: None
        # ... and, once bound, what its ProvisioningRequest came to (``bound_note``)
        self.bound_notes: Callable[[str, Sequence[Binding]], str | None] = lambda g, b: None
        self._reasons: dict[str, str] = {}

    # -- after a session -------------------------------------------------------------

    def observe(self, result: SessionResult) -> None:
        """Note what ``result`` says about each gang (call in the event loop)."""
        for u in result.unschedulable:
            self._waiting(u.podgroup, u.reason)

    def bound(self, gang: str, bindings: Sequence[Binding]) -> None:
        """A gang's bindings all went through."""
        self._reasons.pop(gang, None)
        where = bindings[0].hypernode if bindings and bindings[0].hypernode else "the cluster"
        message = f"{len(bindings)} pods bound within {where}"
        outcome = self._wait_outcome(gang, bindings)
        if outcome:  # a bounded wait: its tier reached in time, or a wider domain taken
            message += f"; {outcome}"
        repaired = self._repair(gang, bindings)
        if repaired:  # replacements beside a running gang's survivors (node repair)
            message += f"; {repaired}"
        provided = self.bound_notes(gang, bindings)
        if provided:  # on nodes cluster-autoscaler brought up for its ProvisioningRequest
            message += f"; {provided}"
        source = self.feed.sources.get(gang)
        if source is None:  # a pod without a PodGroup, or a Kueue pod group: on each pod
            for b in bindings:
                pod = self.feed.cache.pods.get(b.pod)
                if pod is not None:
                    ref = ObjectRef("Pod", "v1", pod.name, pod.namespace, pod.meta.uid)
                    self.recorder.record(
                        ref, NORMAL, "Scheduled", f"Successfully assigned {pod.key} to {b.node}"
                    )
            return
        self.recorder.record(self._ref(gang), NORMAL, "Scheduled", message)
        self._set(gang, scheduled=True, message=message)

    def _repair(self, gang: str, bindings: Sequence[Binding]) -> str | None:
        cache = self.feed.cache
        new = {b.pod for b in bindings}
        running = sum(
            1
            for k in cache.members.get(gang, {})
            if k not in new and (p := cache.pods.get(k)) is not None and p.holds_resources
        )
        where = bindings[0].hypernode if bindings else None
        return repair_note(cache.index, where, len(bindings), running)

    def _wait_outcome(self, gang: str, bindings: Sequence[Binding]) -> str | None:
        cache = self.feed.cache
        pg = cache.podgroups.get(gang)
        if pg is None or not bindings:
            return None
        made = [
            p.meta.created
            for b in bindings
            if (p := cache.pods.get(b.pod)) is not None and p.meta.created is not None
        ]
        waited = time.time() - min(made) if made else None
        return wait_outcome(pg, cache.index, bindings[0].hypernode, waited)

    def renote(self, gang: str) -> None:
        """The gang's note changed (cluster-autoscaler spoke): its condition says it now,
        without waiting for a session."""
        reason = self._reasons.get(gang)
        if reason is not None and gang in self.feed.sources:
            self._set(gang, scheduled=False, message=self._with_note(gang, reason))

    def _with_note(self, gang: str, reason: str) -> str:
        note = self.notes(gang)
        return f"{reason}; {note}" if note else reason

    def _waiting(self, gang: str, reason: str) -> None:
        members = self.feed.cache.members.get(gang, {})
        pending = [
            p for k in members if (p := self.feed.cache.pods.get(k)) is not None and not p.bound
        ]
        if gang in self.feed.sources:
            self._reasons[gang] = reason
            self._set(gang, scheduled=False, message=self._with_note(gang, reason))
            pg = self.feed.cache.podgroups.get(gang)
            if pg is not None and len(members) < pg.min_member:
                return  # its pods are still being created: status says so, no Events
            self.recorder.record(self._ref(gang), WARNING, "Unschedulable", reason)
        elif not members:  # a pod without a PodGroup (a Kueue pod group keeps members)
            pod = self.feed.cache.pods.get(gang)
            pending = [pod] if pod is not None and not pod.bound else []
        for p in pending:
            ref = ObjectRef("Pod", "v1", p.name, p.namespace, p.meta.uid)
            self.recorder.record(ref, WARNING, "FailedScheduling", reason)

    def _ref(self, gang: str) -> ObjectRef:
        source = self.feed.sources[gang]
        namespace, _, name = gang.partition("/")
        res = source.resource
        return ObjectRef(res.kind, res.api_version, name, namespace, source.uid)

    def _counts(self, gang: str) -> tuple[int, int, int, int]:
        pods = [
            self.feed.cache.pods[k]
            for k in self.feed.cache.members.get(gang, {})
            if k in self.feed.cache.pods
        ]
        running = sum(1 for p in pods if p.holds_resources)
        succeeded = sum(1 for p in pods if p.phase is Phase.SUCCEEDED)
        failed = sum(1 for p in pods if p.phase is Phase.FAILED)
        return len(pods), running, succeeded, failed

    def _set(self, gang: str, *, scheduled: bool, message: str) -> None:
        source = self.feed.sources.get(gang)
        if source is None:
            return
        if source.resource == r.WORKLOAD_PODGROUPS:
            cond = {
                "type": SCHEDULED,
                "status": "True" if scheduled else "False",
                "reason": "Scheduled" if scheduled else UNSCHEDULABLE,
                "message": message,
            }
            desired: dict[str, Any] = {"conditions": [cond]}
        else:
            total, running, succeeded, failed = self._counts(gang)
            pg = self.feed.cache.podgroups.get(gang)
            minimum = pg.min_member if pg is not None else 1
            phase = "Pending"
            if total and succeeded == total:
                phase = "Completed"
            elif scheduled or running >= max(minimum, 1):
                phase = "Running"
            cond = {
                "type": "Scheduled" if scheduled else "Unschedulable",
                "status": "True",
                "reason": "GangScheduled" if scheduled else "NotEnoughResources",
                "message": message,
            }
            desired = {
                "phase": phase,
                "running": running,
                "succeeded": succeeded,
                "failed": failed,
                "conditions": [cond],
            }
        group = self._groups.get(gang)
        if group is None:
            group = self._groups[gang] = _Group(source.resource, desired)
        group.resource, group.desired = source.resource, desired
        if group.written != desired:
            self._dirty.set()

    # -- writing ---------------------------------------------------------------------

    async def run(self) -> None:
        await flush_when_dirty(self._dirty, self.flush)

    async def flush(self, *, force: bool = False) -> float | None:
        """Write what is due; the seconds until the next write is due (None: nothing)."""
        now = time.monotonic()
        soonest: float | None = None
        for gang, group in list(self._groups.items()):
            if group.written == group.desired:
                continue
            due = group.written_at + self.interval - now
            if due > 0 and not force:
                soonest = due if soonest is None else min(soonest, due)
                continue
            await self._write(gang, group)
        return soonest

    async def _write(self, gang: str, group: _Group) -> None:
        desired = group.desired
        cond = desired["conditions"][0]
        state = (cond["type"], cond["status"])
        since = group.since if state == group.state else _now()
        conditions = [{**cond, "lastTransitionTime": since}]
        status = {**desired, "conditions": conditions}
        namespace, _, name = gang.partition("/")
        content = STRATEGIC_PATCH if group.resource == r.WORKLOAD_PODGROUPS else MERGE_PATCH
        try:
            await self._patch(group, namespace, name, {"status": status}, content)
        except ApiError as exc:
            if exc.status == 404:
                self._groups.pop(gang, None)
            else:
                log.warning("%s", exc)
            group.written_at = time.monotonic()
            return
        self.writes += 1
        group.written, group.written_at = desired, time.monotonic()
        group.state, group.since = state, since

    async def _patch(
        self, group: _Group, namespace: str, name: str, body: dict[str, Any], content: str
    ) -> None:
        """PATCH the status subresource; Volcano's own PodGroup CRD has none (its status
        is part of the object, ``subresources: {}``), so there the object itself."""
        res = group.resource
        what = f"update {res.kind}/{namespace}/{name} status"
        try:
            await self.kube.request(
                "PATCH",
                res.path(namespace, name, "status"),
                body=body,
                content_type=content,
                what=what,
            )
        except ApiError as exc:
            if exc.status != 404 or res != r.VOLCANO_PODGROUPS:
                raise
            await self.kube.request(
                "PATCH", res.path(namespace, name), body=body, content_type=content, what=what
            )
