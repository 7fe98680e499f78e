"""``tierra scheduler``: the gang scheduler running against a cluster.

Informers feed the core's long-lived ``ClusterStore`` (``feed.py``); sessions run one at a
time, when something changed (at once after a quiet spell; under load, changes gather for
as long as the last session took, up to ``batch_delay``) and every ``period``, in a
worker thread over a view of the store while the informers keep feeding it (a small one
in the event loop: ``_inline``); the binder
applies each gang's decision as soon as the session makes it, while the session decides
the rest and while the next one runs (``binder.py``), so a session over thousands of pods
binds its first pods at once; the status writer and the Event
recorder tell users why gangs wait (``status.py``). With leader election on, the informers
run on every replica (a warm standby takes over without a cold start), but only the
Lease holder runs sessions and writes anything (bindings; PodGroup status; Volcano Queue
status, ``queue_status_writer.py``); a replica that loses the Lease stops,
like kube-scheduler, and is restarted with a fresh cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tierra.kube import resources as r
from tierra.kube.client import ApiError, Kube
from tierra.kube.events import EventRecorder
from tierra.kube.leader import LeaderElector
from tierra.kube.scheduler.autoscaling import AutoscalerSignals
from tierra.kube.scheduler.binder import Binder
from tierra.kube.scheduler.dra_bind import ClaimWriter
from tierra.kube.scheduler.dra_feed import DraFeed
from tierra.kube.scheduler.feed import Feed
from tierra.kube.scheduler.metrics import WAITING_CODES, Metrics
from tierra.kube.scheduler.nominations import NominationWriter
from tierra.kube.scheduler.provisioning_status import RetryPolicy
from tierra.kube.scheduler.queue_status_writer import QueueStatusWriter
from tierra.kube.scheduler.status import StatusWriter
from tierra.kube.serving import Probes, Server
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.devices.constraint import EXTENSION as DEVICES
from tierra.scheduler.devices.room import internal
from tierra.scheduler.result import Binding, Decision, SessionResult
from tierra.scheduler.session import run_session
from tierra.scheduler.state.memory import Memory
from tierra.scheduler.state.store import ClusterStore

log = logging.getLogger(__name__)
GPU_MARK = "gpu"
INLINE_BELOW = 0.005  # seconds: no longer than the GIL's switch interval holds the loop anyway
INLINE_PODS = 32  # pending pods of ours at most, for a session to run inline


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    leader_elect: bool = True
    lease_namespace: str = "tierra-system"
    lease_name: str = "tierra-scheduler"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    metrics_port: int | None = 8090  # its own: 10259 is kube-scheduler's
    health_port: int | None = 8090
    bind_host: str = "0.0.0.0"  # probes and scrapes come from off-host
    period: float = 1.0
    batch_delay: float = 0.02  # the longest changes gather before a session (_gather_for)
    max_binds_in_flight: int = 64
    bind_retry_for: float = 30.0
    volume_bind_timeout: float = 600.0  # VolumeBinding's bindTimeoutSeconds
    queue_status: bool = True  # write Volcano Queue status (off beside Volcano's controllers)
    provisioning_class: str = ""  # a ProvisioningRequest per gang that cannot fit ("": none)
    provisioning_retries: int = 3  # ... asked again after Failed/expired/revoked (Kueue's)
    provisioning_backoff: float = 60.0  # seconds before the first retry, doubling


class LostLease(Exception):
    """This replica lost the Lease: stop, and be restarted with a fresh cache."""


class SchedulerComponent:
    def __init__(self, kube: Kube, options: Options) -> None:
        self.kube = kube
        self.options = options
        self.metrics = Metrics()
        self.cache = ClusterStore()
        self.memory = Memory()
        self._wake = asyncio.Event()
        self.feed: Feed | None = None
        self.sessions = 0
        self.last_session_end = time.monotonic()
        self.last_session_seconds = 0.0
        self.last_session_cpu = 0.0  # its own CPU seconds: what an inline one would block
        self.last_result: SessionResult | None = None
        identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.identity = identity
        # Pending pods of waiting gangs each get an Event: a burst of 100 covers a few
        # gangs' worth before the rate limit (10/s) drops the rest.
        self.recorder = EventRecorder(
            kube, component="tierra-scheduler", host=identity, qps=10.0, burst=100
        )
        self.elector: LeaderElector | None = None
        self.binder: Binder | None = None
        self.dra: DraFeed | None = None  # when the API server serves resource.k8s.io/v1
        self.servers: list[Server] = []
        self.topology_note: str | None = None  # the mirror note last logged
        self.gauged: set[tuple[str, str]] = set()  # HyperNodes the GPU gauges have series of

    def trigger(self) -> None:
        self._wake.set()

    # -- probes ----------------------------------------------------------------------

    def _ready(self) -> str | None:
        if self.feed is None:
            return "starting"
        waiting = [i.name for i in self.feed.informers if not i.synced.is_set()]
        return f"informers not synced: {', '.join(waiting)}" if waiting else None

    def _live(self) -> str | None:
        # A session loop stuck for far longer than any session takes is not alive.
        if self.elector is not None and not self.elector.is_leader:
            return None
        stuck = time.monotonic() - self.last_session_end
        limit = max(60.0, 30 * self.options.period)
        return f"no session finished for {stuck:.0f} s" if stuck > limit else None

    async def _serve(self) -> None:
        o = self.options
        probes = Probes(live={"session-loop": self._live}, ready={"informers": self._ready})
        ports: dict[int, bool] = {}
        if o.health_port is not None:
            ports[o.health_port] = o.metrics_port == o.health_port
        if o.metrics_port is not None and o.metrics_port != o.health_port:
            ports[o.metrics_port] = True
        for port, with_metrics in ports.items():
            server = Server(
                probes, self.metrics.registry if with_metrics else None, host=o.bind_host, port=port
            )
            await server.start()
            self.servers.append(server)

    # -- running ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run until cancelled; raise LostLease when the Lease was lost."""
        optional = [
            *(r.WORKLOAD_PODGROUPS, *r.HYPERNODES, r.VOLCANO_PODGROUPS, r.VOLCANO_QUEUES),
            *r.DRA,
        ]
        served = await r.served(self.kube, optional)
        for res in optional:
            if res not in served:
                log.warning(
                    "%s is not served by this API server; not watched (install it and "
                    "restart to use it)",
                    res.name,
                )
        self.feed = Feed(
            self.kube,
            self.cache,
            scheduler_names=self.options.config.scheduler_names,
            metrics=self.metrics,
            on_change=self.trigger,
            served=served,
        )
        if all(res in served for res in r.DRA):
            self.dra = DraFeed(self.feed, self.recorder)
            self.cache.extensions[DEVICES] = self.dra.devices
        await self._serve()
        background = [
            asyncio.create_task(i.run(), name=f"informer {i.name}") for i in self.feed.informers
        ]
        background.append(asyncio.create_task(self.recorder.run(), name="events"))
        background.append(asyncio.create_task(self._count_errors(), name="informer-errors"))
        try:
            if self.options.leader_elect:
                o = self.options
                self.elector = LeaderElector(
                    self.kube,
                    namespace=o.lease_namespace,
                    name=o.lease_name,
                    identity=self.identity,
                    lease_duration=o.lease_duration,
                    renew_deadline=o.renew_deadline,
                    retry_period=o.retry_period,
                )
                await self._run_elected(self.elector)
            else:
                await self._lead()
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for server in self.servers:
                await server.stop()

    async def _run_elected(self, elector: LeaderElector) -> None:
        was_leader = False
        election = asyncio.create_task(elector.run(self._lead), name="leader-election")
        try:
            while not election.done():
                elector.leader_changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(elector.leader_changed.wait(), 1.0)
                self.metrics.leader.set(1 if elector.is_leader else 0)
                if was_leader and not elector.is_leader:
                    raise LostLease(
                        f"{self.identity} lost Lease "
                        f"{self.options.lease_namespace}/{self.options.lease_name}"
                    )
                was_leader = was_leader or elector.is_leader
            election.result()
        finally:
            if not election.done():
                election.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await election

    async def _count_errors(self) -> None:
        assert self.feed is not None
        seen = {i.name: 0 for i in self.feed.informers}
        while True:
            await asyncio.sleep(1.0)
            for i in self.feed.informers:
                new = i.stats.errors - seen[i.name]
                if new:
                    self.metrics.informer_errors.labels(i.name).inc(new)
                    seen[i.name] = i.stats.errors

    async def _lead(self) -> None:
        """The leader's work: wait for the informers, then sessions until cancelled."""
        feed = self.feed
        assert feed is not None
        await asyncio.gather(*(i.synced.wait() for i in feed.informers))
        # The cache as first listed lives as long as the process; frozen, later collections
        # skip it (a full collection over 100,000 cached pods stalled a session ~40 ms).
        gc.freeze()
        status = StatusWriter(self.kube, feed, self.recorder)
        signals = AutoscalerSignals(
            self.kube,
            feed,
            self.metrics,
            provisioning_class=self.options.provisioning_class,
            retry=RetryPolicy(self.options.provisioning_retries, self.options.provisioning_backoff),
            recorder=self.recorder,
            on_note=status.renote,
            on_retry_due=self.trigger,
        )
        status.notes = signals.note
        status.bound_notes = signals.bound_note

        def bound(gang: str, bindings: Sequence[Binding]) -> None:
            status.bound(gang, bindings)
            signals.bound(gang, bindings)

        nominations = NominationWriter(self.kube, feed)
        binder = Binder(
            self.kube,
            feed,
            self.metrics,
            max_in_flight=self.options.max_binds_in_flight,
            retry_for=self.options.bind_retry_for,
            on_failure=self.trigger,
            on_bound=bound,
            claims=ClaimWriter(self.kube, self.dra) if self.dra is not None else None,
            nominate=nominations.nominate,
            volume_bind_timeout=self.options.volume_bind_timeout,
        )
        self.binder = binder
        writer = asyncio.create_task(status.run(), name="status")
        nominator = asyncio.create_task(nominations.run(), name="nominations")
        queues = QueueStatusWriter(self.kube, lambda name: name in self.cache.queues, self.metrics)
        queue_writer = asyncio.create_task(queues.run(), name="queue status")
        signals_writer = asyncio.create_task(signals.run(), name="autoscaler signals")
        self.metrics.leader.set(1)
        try:
            self.last_session_end = time.monotonic()
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.options.period)
                gather = self._gather_for()
                if gather > 0:
                    await asyncio.sleep(gather)
                self._wake.clear()
                if feed.listing:
                    continue
                result = await self._session(feed, binder)
                status.observe(result)
                signals.observe(result)
                nominations.observe(result)
                if self.options.queue_status:
                    queues.observe(result)
        finally:
            self.metrics.leader.set(0)
            writer.cancel()
            queue_writer.cancel()
            signals_writer.cancel()
            nominator.cancel()
            await binder.cancel()
            for task in (writer, queue_writer, signals_writer, nominator):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _gather_for(self) -> float:
        """How long changes may gather before the next session.

        None after a quiet spell: a pod created when nothing else is happening is decided
        at once (a fixed delay here was most of a lone pod's created-to-bound latency,
        about 20 of 30 ms, against kube-scheduler's 2 ms). While sessions follow one
        another, the gap after a session is as long as the session was, up to
        ``batch_delay``: the event loop keeps at least half the time for watches and
        bindings, and a burst is decided in a few large sessions, not many small ones.
        """
        gap = min(self.options.batch_delay, self.last_session_seconds)
        return gap - (time.monotonic() - self.last_session_end)

    def _inline(self, feed: Feed) -> bool:
        """Whether the next session is small enough to run in the event loop itself: the
        last one took under ``INLINE_BELOW`` of CPU (its wall time on a busy machine says
        more about the machine) and few pods wait. A worker thread lets the
        loop read watches and post bindings while a long session decides, but a session
        of a millisecond gains nothing from it and pays two thread hand-offs (and the
        GIL's switch interval) between the pod's event and its binding."""
        return self.last_session_cpu < INLINE_BELOW and len(feed.created) <= INLINE_PODS

    async def _session(self, feed: Feed, binder: Binder) -> SessionResult:
        """One session, in a worker thread unless it is small (``_inline``); each gang's
        decision goes to the binder as soon as it is made, so binding starts while the
        session decides the rest."""
        loop = asyncio.get_running_loop()

        def decided(d: Decision) -> None:  # in the session's thread
            if d.bindings or d.evictions:
                loop.call_soon_threadsafe(binder.decided, d)

        started = time.perf_counter()
        self._note_topology()
        if self.dra is not None:
            self.dra.refresh()
        binder.begin()
        run = functools.partial(
            run_session,
            self.cache,
            self.options.config,
            memory=self.memory,
            now=time.time(),  # the preemption delay: gangs pending since creationTimestamp
            on_decision=decided,
        )

        def session() -> SessionResult:  # in whichever thread runs it
            cpu = time.thread_time()
            try:
                return run()
            finally:
                self.last_session_cpu = time.thread_time() - cpu

        with feed.session():
            result = session() if self._inline(feed) else await asyncio.to_thread(session)
        elapsed = time.perf_counter() - started
        self.sessions += 1
        self.last_session_end = time.monotonic()
        self.last_session_seconds = elapsed
        self.last_result = result
        m = self.metrics
        m.sessions.inc()
        m.session_seconds.observe(elapsed)
        for d in result.decisions:
            m.decision_seconds.observe(d.seconds)
        codes: dict[str, int] = {}
        for u in result.unschedulable:
            codes[u.status.code.value] = codes.get(u.status.code.value, 0) + 1
        for code in WAITING_CODES:
            m.pending_gangs.labels(code).set(codes.get(code, 0))
        self._gpu_gauges()
        return result

    def _note_topology(self) -> None:
        """Log, once each time it changes, which group sessions schedule by where the
        controller's Volcano copies are set aside (``tierra.topology.mirrors``)."""
        mirrors = self.cache.index.mirrors
        note = mirrors.note() if mirrors else None
        if note != self.topology_note:
            self.topology_note = note
            if note is not None:
                log.info("topology: %s", note)

    def _gpu_gauges(self) -> None:
        self.gauged = gpu_gauges(self.cache, self.metrics, self.gauged)


def gpu_gauges(
    cache: ClusterStore, metrics: Metrics, before: set[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Free and total GPUs per HyperNode, from the topology layer's ledgers: extended
    resources only (DRA devices counted as room are the session's own, ``room.py``).
    Labelled by (name, group), a HyperNode's identity; a HyperNode of ``before`` (the
    series set last time) that is gone loses its series. The series set now."""
    cols = gpu_columns(cache.capacity.axis.index)
    if not cols:
        return before
    alloc = cache.capacity.dom_alloc[:, cols].sum(axis=1) // 1000
    used = cache.capacity.dom_used[:, cols].sum(axis=1) // 1000
    free = np.maximum(alloc - used, 0)
    now: set[tuple[str, str]] = set()
    for h, (group, name) in enumerate(cache.index.keys):
        now.add((name, group))
        metrics.gpus.labels(name, group, "total").set(int(alloc[h]))
        metrics.gpus.labels(name, group, "free").set(int(free[h]))
    for name, group in before - now:
        for state in ("total", "free"):
            metrics.gpus.remove(name, group, state)
    return now


def gpu_columns(index: Mapping[str, int]) -> list[int]:
    """The ledger columns the GPU gauges add up: extended resources naming a GPU, never
    the session's own device room (``devices.tierra.dev/<class>``)."""
    return [i for name, i in index.items() if GPU_MARK in name and not internal(name)]


async def check_access(kube: Kube) -> None:
    """Fail early, with the server's words, when the cluster cannot be read at all."""
    try:
        await kube.get(r.NODES.path(), query={"limit": 1}, what="list Nodes")
    except ApiError as exc:
        raise ApiError(exc.status, exc.reason, exc.message, f"cannot start: {exc.what}") from exc
