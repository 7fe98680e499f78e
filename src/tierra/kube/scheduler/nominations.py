"""``status.nominatedNodeName``, written where kube-scheduler writes it.

kube-scheduler sets a preemptor's ``nominatedNodeName`` to the node its preemption freed
(``handleSchedulingFailure`` after PostFilter, ``updatePod``: a merge of the pod's status)
and clears it when an attempt fails that preemption cannot help (``clearNominatedNode``);
the API server clears it when the pod is bound (``ClearingNominatedNodeNameAfterBinding``,
on by default since 1.35). Other schedulers, cluster-autoscaler and a restarted tierra
read it back; the scheduler's nominator holds the node's room for the pod meanwhile
(``scheduler/podrules/nominated.py``).

tierra places a preemptor in the session that evicts for it and binds it once the
victims are gone, so:

* ``nominate``: before the binder waits for a gang's victims, each of its pods gets its
  node as ``nominatedNodeName`` (the binder awaits it, so the write lands before the
  binding that clears it);
* ``observe``: a gang a session leaves waiting gives its nomination up -- its pending
  pods that carry one get it cleared, and the hold goes with it when the watch brings
  the pod back.

Writes carry the pod's UID as a precondition (a pod re-created under the name is left
alone); a pod gone or re-created (404, 409) is nothing to say.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tierra.api.pod import Pod
from tierra.kube.client import ApiError, Kube
from tierra.kube.scheduler.nominated_node import write_nomination
from tierra.kube.scheduler.status import flush_when_dirty
from tierra.scheduler.podrules.nominations import nominated_node
from tierra.scheduler.result import Binding, SessionResult

if TYPE_CHECKING:
    from tierra.kube.scheduler.feed import Feed  # the feed's storage handlers import this

log = logging.getLogger(__name__)


def _waiting(pod: Pod, key: str, assumed: set[str]) -> bool:
    return not pod.bound and not pod.terminated and key not in assumed


class NominationWriter:
    def __init__(self, kube: Kube, feed: Feed, *, concurrency: int = 16) -> None:
        self.kube = kube
        self.feed = feed
        self.writes = 0
        self._limit = asyncio.Semaphore(concurrency)
        self._clear: set[str] = set()  # pods whose nomination a waiting gang gave up
        self._dirty = asyncio.Event()

    async def nominate(self, bindings: Sequence[Binding]) -> None:
        """Each preemptor pod's node as its ``nominatedNodeName`` (the binder calls this
        before it waits for the gang's victims)."""
        await asyncio.gather(*(self._write(b.pod, b.node) for b in bindings))

    def observe(self, result: SessionResult) -> None:
        """Clear the nominations of the pending pods of the gangs ``result`` left waiting
        (call in the event loop, after the session)."""
        cache = self.feed.cache
        for u in result.unschedulable:
            members = cache.members.get(u.podgroup)
            for key in list(members) if members else [u.podgroup]:
                pod = cache.pods.get(key)
                if pod is not None and _waiting(pod, key, cache.assumed) and nominated_node(pod):
                    self._clear.add(key)
        if self._clear:
            self._dirty.set()

    async def run(self) -> None:
        await flush_when_dirty(self._dirty, self.flush)

    async def flush(self) -> float | None:
        due, self._clear = sorted(self._clear), set()
        await asyncio.gather(*(self._write(key, "") for key in due))
        return None

    async def _write(self, key: str, node: str) -> None:
        pod = self.feed.cache.pods.get(key)
        if pod is None:
            return
        waiting = _waiting(pod, key, self.feed.cache.assumed)
        if not node and (not waiting or not nominated_node(pod)):
            return  # bound meanwhile (the API cleared it) or cleared already
        async with self._limit:
            try:
                await write_nomination(self.kube, key, node, pod.meta.uid)
            except ApiError as exc:
                if exc.status not in (404, 409):
                    log.warning("%s", exc)
                return
        self.writes += 1
