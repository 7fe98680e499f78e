"""Kubernetes Events, rate-limited so a gang waiting for hours does not flood etcd.

Three limits, the ones client-go's EventCorrelator applies:

* the same (object, type, reason, message) is written at most once per
  ``repeat_interval``; repeats in between are counted and the next write updates the
  existing Event's ``count`` and ``lastTimestamp`` instead of creating a new object;
* a token bucket (``qps``, ``burst``) over all writes: past it, events are dropped
  (counted in ``stats.dropped``), never queued without bound;
* a bounded queue between the caller and the writer, so ``record`` never blocks the
  scheduler and an API server that is away cannot make memory grow.

Events are core/v1 ``Event`` objects (what ``kubectl describe`` and ``kubectl get events``
show), written in the involved object's namespace (``default`` for cluster-scoped ones).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.resources import EVENTS

log = logging.getLogger(__name__)
NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about."""

    kind: str
    api_version: str
    name: str
    namespace: str = ""
    uid: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "apiVersion": self.api_version, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(slots=True)
class _Seen:
    name: str = ""  # the Event object once created
    namespace: str = ""
    count: int = 0  # occurrences written so far
    pending: int = 0  # occurrences not yet written
    first: str = ""
    last_sent: float = -1e18
    queued: bool = False


@dataclass(slots=True)
class EventStats:
    created: int = 0
    updated: int = 0
    suppressed: int = 0  # repeats folded into a later count
    dropped: int = 0  # over the rate limit or the queue
    failed: int = 0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


Key = tuple[str, str, str, str, str, str]


class EventRecorder:
    """``record(...)`` from anywhere in the event loop; ``run()`` writes in the background."""

    def __init__(
        self,
        kube: Kube,
        *,
        component: str,
        host: str = "",
        qps: float = 5.0,
        burst: int = 25,
        repeat_interval: float = 60.0,
        queue_size: int = 1000,
        remember: int = 4096,
    ) -> None:
        self.kube = kube
        self.component = component
        self.host = host
        self.qps = qps
        self.burst = burst
        self.repeat_interval = repeat_interval
        self.stats = EventStats()
        self._queue: asyncio.Queue[Key] = asyncio.Queue(queue_size)
        self._seen: OrderedDict[Key, _Seen] = OrderedDict()
        self._refs: dict[Key, ObjectRef] = {}
        self._remember = remember
        self._tokens = float(burst)
        self._stamp = time.monotonic()

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Note one occurrence; it is written now, folded into a later write, or dropped."""
        message = message[:MAX_MESSAGE]
        key: Key = (ref.kind, ref.namespace, ref.name, type_, reason, message)
        seen = self._seen.get(key)
        now = time.monotonic()
        if seen is None:
            seen = self._seen[key] = _Seen()
            self._refs[key] = ref
            while len(self._seen) > self._remember:
                old, _ = self._seen.popitem(last=False)
                self._refs.pop(old, None)
        else:
            self._seen.move_to_end(key)
        seen.pending += 1
        if seen.queued or now - seen.last_sent < self.repeat_interval:
            self.stats.suppressed += 1
            return  # folded into the next write of this event
        if not self._take(now):
            self.stats.dropped += 1
            seen.pending -= 1
            return
        try:
            self._queue.put_nowait(key)
        except asyncio.QueueFull:
            self.stats.dropped += 1
            seen.pending -= 1
            return
        seen.last_sent, seen.queued = now, True

    def _take(self, now: float) -> bool:
        self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def run(self) -> None:
        while True:
            key = await self._queue.get()
            try:
                await self._write(key)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until everything queued so far is written (tests, shutdown)."""
        await self._queue.join()

    async def _write(self, key: Key) -> None:
        seen = self._seen.get(key)
        ref = self._refs.get(key)
        if seen is None or ref is None:
            return
        _, _, _, type_, reason, message = key
        seen.queued = False
        count, seen.pending = seen.count + seen.pending, 0
        now = _now()
        try:
            if seen.name:
                patch = {"count": count, "lastTimestamp": now}
                await self.kube.request(
                    "PATCH",
                    EVENTS.path(seen.namespace, seen.name),
                    body=patch,
                    content_type=MERGE_PATCH,
                    what=f"update Event/{seen.namespace}/{seen.name}",
                )
                self.stats.updated += 1
            else:
                namespace = ref.namespace or "default"
                name = f"{ref.name}.{time.time_ns():x}"[:253]
                body: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": ref.to_dict(),
                    "type": type_,
                    "reason": reason,
                    "message": message,
                    "count": count,
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "source": {
                        "component": self.component,
                        **({"host": self.host} if self.host else {}),
                    },
                }
                await self.kube.request(
                    "POST", EVENTS.path(namespace), body=body, what=f"create Event/{name}"
                )
                seen.name, seen.namespace, seen.first = name, namespace, now
                self.stats.created += 1
            seen.count = count
        except ApiError as exc:
            self.stats.failed += 1
            seen.pending += count - seen.count  # try again with the next occurrence
            if exc.status == 404:
                seen.name = ""  # the Event expired (TTL): create a new one next time
            log.warning("event not written: %s", exc)
