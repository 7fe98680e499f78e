"""Apply a session's decisions to the cluster: evictions first, then bindings, gang by gang.

The session has already *assumed* its bindings in the cache (they count as used room)
and released its victims' room. The binder makes the API agree, gang by gang as the
session hands each decision over (``decided``, while the session goes on), or a whole
session at once (``submit``):

* evictions go through the Eviction API (``pods/{name}/eviction``, so PodDisruptionBudgets
  are honoured); bindings the session hands over after an eviction wait until the API
  has deleted every victim, because before that the room is not really free. A victim
  that cannot be evicted puts it back and forgets those bindings: they may need that room.
* each binding is a ``POST pods/{name}/binding``, at most ``max_in_flight`` at once across
  all gangs; an answer the server could not give (unreachable, 429, 502-504) is retried
  with back-off for ``retry_for`` seconds, which covers an API server restart.
* 409 means the pod is already bound: the pod is read back; bound where we wanted is a
  success (an earlier attempt went through and its answer was lost), bound elsewhere (a
  second scheduler) is fed to the cache as it is; 404 means the pod is gone.
* every failed binding is *forgotten* in the cache (its room released, the pod pending
  again) and a session is asked for: the gang's remaining pods are retried together,
  inside the domain its bound pods already hold.

The pods never see the binder's opinion until the API confirms it: the cache keeps an
assumed pod assumed while the watch still shows it pending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tierra.kube import resources as r
from tierra.kube.client import ApiError, Kube
from tierra.kube.informer import Backoff
from tierra.kube.scheduler import decode
from tierra.kube.scheduler.dra_bind import ClaimWriter
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import Metrics
from tierra.kube.scheduler.storage_feed import BIND_TIMEOUT, PreBindFailed, pre_bind
from tierra.scheduler.result import Binding, Decision, Eviction, SessionResult

log = logging.getLogger(__name__)


def _split(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


class Binder:
    def __init__(
        self,
        kube: Kube,
        feed: Feed,
        metrics: Metrics,
        *,
        max_in_flight: int = 64,
        retry_for: float = 30.0,
        eviction_timeout: float = 120.0,
        on_failure: Callable[[], None] = lambda: None,
        on_bound: Callable[[str, Sequence[Binding]], None] = lambda gang, b: None,
        claims: ClaimWriter | None = None,
        nominate: Callable[[Sequence[Binding]], Awaitable[None]] | None = None,
        volume_bind_timeout: float = BIND_TIMEOUT,
    ) -> None:
        self.kube = kube
        self.feed = feed
        self.metrics = metrics
        self.retry_for = retry_for
        self.eviction_timeout = eviction_timeout
        self.on_failure = on_failure
        self.on_bound = on_bound
        self.claims = claims  # DRA: claims allocated before a binding, released after a failed one
        # status.nominatedNodeName on a preemptor's pods while its victims go (nominations.py)
        self.nominate = nominate
        self.volume_bind_timeout = volume_bind_timeout  # pre-bind's wait for claims Bound
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._victims: list[asyncio.Task[bool]] = []  # this session's evictions
        self.bound = 0
        self.failed = 0

    def begin(self) -> None:
        """A session starts: the bindings it hands over wait for the evictions it makes
        (before they are gone the room is not really free), not for earlier sessions'."""
        self._victims = []

    def submit(self, result: SessionResult) -> None:
        """Start applying a whole session's ``result`` in the background: every eviction,
        then the bindings, gang by gang."""
        self.begin()
        gangs: dict[str, list[Binding]] = {}
        for b in result.bindings:
            gangs.setdefault(_gang_of(self.feed, b.pod) or b.pod, []).append(b)
        if result.evictions:
            self._evictions(result.evictions)
        for gang, bindings in gangs.items():
            self._bindings(gang, bindings)

    def decided(self, decision: Decision) -> None:
        """Start applying one gang's decision while its session goes on (call in the
        event loop): its evictions, then its bindings once every eviction the session
        made so far is done."""
        if decision.evictions:
            self._evictions(decision.evictions)
        if decision.bindings:
            # its own evictions make its pods preemptors: nominated while the victims go
            self._bindings(decision.gang, list(decision.bindings), bool(decision.evictions))

    def _evictions(self, evictions: Sequence[Eviction]) -> None:
        task = asyncio.create_task(self._evict(evictions))
        self._victims.append(task)
        self._track(task)

    def _bindings(self, gang: str, bindings: list[Binding], preempted: bool = False) -> None:
        victims = list(self._victims)
        self._track(asyncio.create_task(self._bind_after(victims, gang, bindings, preempted)))

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for everything submitted so far (tests, benchmarks, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _bind_after(
        self,
        evicting: list[asyncio.Task[bool]],
        gang: str,
        bindings: list[Binding],
        preempted: bool = False,
    ) -> None:
        if preempted and self.nominate is not None:
            await self.nominate(bindings)  # before the binding, which clears it
        if evicting and not all(await asyncio.gather(*evicting)):
            for b in bindings:
                self._forget(b.pod)
            self.on_failure()
            return
        await self._bind_gang(gang, bindings)

    # -- evictions -------------------------------------------------------------------

    async def _evict(self, evictions: Sequence[Eviction]) -> bool:
        keys = {e.pod for e in evictions}
        for key in keys:
            self.feed.evicted(key)
        results = await asyncio.gather(*(self._evict_one(e) for e in evictions))
        if not all(results):
            return False
        if not await self.feed.wait_evicted(keys, self.eviction_timeout):
            log.warning(
                "evicted pods not gone after %.0f s; their room is not used", self.eviction_timeout
            )
            return False
        return True

    async def _evict_one(self, ev: Eviction) -> bool:
        namespace, name = _split(ev.pod)
        body = {
            "apiVersion": r.EVICTION_VERSION,
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        deadline = time.monotonic() + self.eviction_timeout
        backoff = Backoff(initial=0.5, maximum=5.0)
        while True:
            try:
                await self.kube.request(
                    "POST",
                    r.PODS.path(namespace, name, "eviction"),
                    body=body,
                    what=f"evict Pod/{ev.pod} from Node/{ev.node}",
                )
                self.metrics.evictions.inc()
                return True
            except ApiError as exc:
                if exc.status == 404:
                    self.feed.evicting.discard(ev.pod)
                    self.feed.gone.set()
                    return True
                # 429: a PodDisruptionBudget forbids it for now
                if (exc.retryable or exc.status == 429) and time.monotonic() < deadline:
                    await asyncio.sleep(backoff.delay())
                    continue
                log.warning("%s; the preemption is abandoned", exc)
                self.feed.evicting.discard(ev.pod)
                await self._refresh(ev.pod)
                return False

    async def _refresh(self, key: str) -> None:
        """Feed the pod as the API has it (after we stopped trusting our own view)."""
        namespace, name = _split(key)
        try:
            raw = await self.kube.get(r.PODS.path(namespace, name), what=f"read Pod/{key}")
        except ApiError as exc:
            if exc.status == 404:
                self.feed.apply(lambda: self.feed.cache.remove_pod(key))
            return
        live = decode.pod(raw)
        self.feed.apply(lambda: self.feed.cache.upsert_pod(live.pod))

    # -- bindings --------------------------------------------------------------------

    async def _bind_gang(self, gang: str, bindings: list[Binding]) -> None:
        if self.claims is not None and not await self._reserve_claims(bindings):
            self.on_failure()
            return
        results = await asyncio.gather(*(self._bind(b) for b in bindings))
        if all(results):
            created = [self.feed.created.pop(b.pod, 0.0) for b in bindings]
            last = max(created, default=0.0)
            if last > 0:
                self.metrics.gang_latency.observe(max(0.0, time.time() - last))
            # Not while a session runs: the callback reads the cache the session writes.
            self.feed.apply(lambda: self.on_bound(gang, bindings))
        else:
            self.on_failure()

    def _forget(self, key: str) -> None:
        self.failed += 1
        self.metrics.forgotten.inc()
        self.feed.apply(lambda: self.feed.cache.forget(key))

    async def _reserve_claims(self, bindings: list[Binding]) -> bool:
        """DRA: every pod's claims allocated before any pod of the gang is bound; when one
        cannot be, all are released and no pod is bound (all-or-nothing covers devices)."""
        assert self.claims is not None
        for i, b in enumerate(bindings):
            if not await self.claims.reserve(b):
                for done in reversed(bindings[:i]):  # last first: a PodGroup's claim
                    await self.claims.release(done)  # goes with the pod that allocated it
                for each in bindings:
                    self._forget(each.pod)
                return False
        return True

    async def _bind(self, b: Binding) -> bool:
        bound = await self._post_binding(b)
        if not bound and self.claims is not None:
            await self.claims.release(b)
        return bound

    async def _post_binding(self, b: Binding) -> bool:
        namespace, name = _split(b.pod)
        try:  # VolumeBinding's pre-bind: claims written and Bound first (storage_feed.py)
            await pre_bind(self.kube, self.feed.cache, b.pod, timeout=self.volume_bind_timeout)
        except (ApiError, PreBindFailed) as exc:
            log.warning("pre-bind of Pod/%s: %s", b.pod, exc)
            self._forget(b.pod)
            return False
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        }
        deadline = time.monotonic() + self.retry_for
        backoff = Backoff(initial=0.2, maximum=3.0)
        while True:
            try:
                async with self._slots:
                    self.metrics.binds_in_flight.inc()
                    try:
                        await self.kube.request(
                            "POST",
                            r.PODS.path(namespace, name, "binding"),
                            body=body,
                            what=f"bind Pod/{b.pod} to Node/{b.node}",
                        )
                    finally:
                        self.metrics.binds_in_flight.dec()
            except ApiError as exc:
                self.metrics.bind_errors.labels(str(exc.status)).inc()
                if exc.status == 409:
                    return await self._already_bound(b)
                if exc.retryable and time.monotonic() < deadline:
                    await asyncio.sleep(backoff.delay())
                    continue
                if exc.status != 404:
                    log.warning("%s", exc)
                self._forget(b.pod)
                return False
            self.bound += 1
            self.metrics.binds.inc()
            return True

    async def _already_bound(self, b: Binding) -> bool:
        namespace, name = _split(b.pod)
        try:
            raw = await self.kube.get(r.PODS.path(namespace, name), what=f"read Pod/{b.pod}")
        except ApiError:
            self._forget(b.pod)
            return False
        node = str((raw.get("spec") or {}).get("nodeName") or "")
        if node == b.node:
            self.bound += 1
            self.metrics.binds.inc()
            return True  # an earlier attempt went through; its answer was lost
        if node:
            log.warning(
                "Pod/%s was bound to Node/%s by someone else (tierra chose %s)", b.pod, node, b.node
            )
            live = decode.pod(raw)
            self.failed += 1
            self.feed.apply(lambda: self.feed.cache.upsert_pod(live.pod))
        else:
            self._forget(b.pod)
        return False


def _gang_of(feed: Feed, pod_key: str) -> str | None:
    pod = feed.cache.pods.get(pod_key)
    if pod is None or not pod.group_name:
        return None
    return f"{pod.namespace}/{pod.group_name}"
