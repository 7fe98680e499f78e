"""Each Volcano Queue's status as the scheduler sees it: what it holds and its gangs.

After a session, ``SessionResult.queues`` says per queue what is allocated and how many
of its PodGroups run and wait (``scheduler.queue_status``); this writes that to the
Queue's ``/status`` (a merge patch of ``allocated``, ``running`` and ``pending``) for
Queue objects that exist, and only when it differs from what was last written, so a
quiet cluster costs no writes however often sessions run. A replica that takes over
writes each queue once (it does not know what its predecessor wrote).

Volcano's own controllers write the same fields; beside them, run the scheduler with
``--no-queue-status`` (the ``volcano`` overlay does).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tierra.kube import resources as r
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.scheduler.metrics import Metrics
from tierra.scheduler.queueing.queue_status import volcano_status_patches
from tierra.scheduler.result import SessionResult

log = logging.getLogger(__name__)


class QueueStatusWriter:
    def __init__(
        self,
        kube: Kube,
        exists: Callable[[str], bool],
        metrics: Metrics,
        *,
        retry: float = 5.0,
    ) -> None:
        self.kube = kube
        self.metrics = metrics
        self.exists = exists  # whether a Queue of that name is in the API (the cache's view)
        self.retry = retry
        self._written: dict[str, dict[str, Any]] = {}
        self._desired: dict[str, dict[str, Any]] = {}
        self._dirty = asyncio.Event()

    def observe(self, result: SessionResult) -> None:
        """Note each queue's status after a session (call in the event loop)."""
        for name, patch in volcano_status_patches(result.queues).items():
            if not self.exists(name) or self._written.get(name) == patch:
                self._desired.pop(name, None)  # back to what was written: nothing to do
            else:
                self._desired[name] = patch
                self._dirty.set()

    async def run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if not await self.flush():
                await asyncio.sleep(self.retry)
                self._dirty.set()

    async def flush(self) -> bool:
        """Write every queue whose status changed; False when a write should be retried."""
        ok = True
        for name, patch in list(self._desired.items()):
            try:
                await self.kube.request(
                    "PATCH",
                    r.VOLCANO_QUEUES.path(name=name, subresource="status"),
                    body=patch,
                    content_type=MERGE_PATCH,
                    what=f"update Queue/{name} status",
                )
            except ApiError as exc:
                if exc.status == 404:  # deleted meanwhile
                    self._desired.pop(name, None)
                    continue
                log.warning("%s", exc)
                ok = False
                continue
            self.metrics.queue_status_writes.inc()
            self._written[name] = patch
            if self._desired.get(name) == patch:
                del self._desired[name]
        return ok
