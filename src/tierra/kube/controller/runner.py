"""The running controller: informers feed the cache, loops do the work, one config at a time.

While this replica leads (or always, without leader election), ``Controller.run``:

1. starts the informers (Nodes; HyperNodes of every group written or given status;
   ResourceSlices when a ``dra`` source is configured) and waits for their first lists:
   a plan over a half-filled cache would create what exists and delete what it has not
   seen yet;
2. starts each source's input watchers, and one loop per source: on a change (or every
   ``resync``) the source runs, and a result is reconciled (``Reconciler``); a source that
   fails writes nothing and is counted;
3. starts the status loop and, when an export is configured, the export loop.

Each loop waits for its signal, then for a quiet period (``debounce``; at most
``MAX_DELAY`` after the first change, so a steady stream of changes still gets served),
runs, and after a failure (the API server away) waits with back-off and runs again.

``ConfigWatch`` holds the configuration: a file read once, or a ConfigMap watched; a
changed, valid configuration restarts the work with it, an invalid one is reported and
the running configuration kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from tierra.discovery.ufm_client import UfmError
from tierra.errors import ConfigError, InputError
from tierra.kube.client import ApiError, Kube
from tierra.kube.controller.cache import (
    ControllerCache,
    Signal,
    decode_cached_node,
    decode_slice,
)
from tierra.kube.controller.config import ControllerConfig, SourceKind, config_from_text
from tierra.kube.controller.export_writer import ExportWriter
from tierra.kube.controller.metrics import Metrics
from tierra.kube.controller.reconciler import Reconciler, Report, Unavailable
from tierra.kube.controller.sources import LiveSource, label_keys
from tierra.kube.controller.status_writer import StatusWriter
from tierra.kube.informer import Backoff, Event, EventType, Informer
from tierra.kube.resources import CONFIGMAPS, HYPERNODES, NODES, RESOURCE_SLICES

log = logging.getLogger(__name__)
MAX_DELAY = 2.0
RETRY_SOON = 1.0
SOURCE_ERRORS = (InputError, ConfigError, UfmError)


class Controller:
    """One configuration's worth of work; ``run()`` until cancelled."""

    def __init__(
        self,
        kube: Kube,
        config: ControllerConfig,
        *,
        namespace: str,
        folder: Path,
        metrics: Metrics,
        report: Report | None = None,
    ) -> None:
        self.kube = kube
        self.config = config
        self.namespace = namespace
        self.metrics = metrics
        self.cache = ControllerCache(label_keys=label_keys(list(config.sources)))
        self.primary = config.primary_group
        self.reconciler = Reconciler(kube, self.cache, config, metrics, report)
        self.status = StatusWriter(
            kube, self.cache, config.status_groups, metrics, primary=self.primary
        )
        self.exporter = ExportWriter(kube, self.cache, config, metrics, namespace)
        self.sources = [
            LiveSource(s, cache=self.cache, kube=kube, folder=folder, namespace=namespace)
            for s in config.sources
        ]
        self.informers: list[Informer[Any]] = self._informers()
        self.last_errors: dict[str, str] = {}  # source -> why its last run wrote nothing

    # -- readiness ------------------------------------------------------------------------

    def not_ready(self) -> str | None:
        waiting = [i.name for i in self.informers if not i.synced.is_set()]
        return f"waiting for the first list of {', '.join(waiting)}" if waiting else None

    # -- the informers --------------------------------------------------------------------

    def _informers(self) -> list[Informer[Any]]:
        cache, primary = self.cache, self.primary

        def on_node(e: Event[Any]) -> None:
            if e.type is EventType.DELETED:
                cache.remove_node(e.key)
            elif e.obj is not None:
                cache.upsert_node(e.obj)

        def on_hypernode(group: str) -> Callable[[Event[Any]], None]:
            def handle(e: Event[Any]) -> None:
                if e.type is EventType.DELETED:
                    cache.remove_hypernode(group, e.key, primary=primary)
                elif e.obj is not None:
                    cache.upsert_hypernode(e.obj, primary=primary)

            return handle

        def on_slice(e: Event[Any]) -> None:
            if e.type is EventType.DELETED:
                cache.remove_slice(e.key)
            elif e.obj is not None:
                cache.upsert_slice(e.key, e.obj)

        out: list[Informer[Any]] = [Informer(self.kube, NODES, decode_cached_node, on_node)]
        groups = {*self.config.groups, *self.config.status_groups}
        for r in HYPERNODES:
            if r.group in groups:
                out.append(Informer(self.kube, r, cache.decode, on_hypernode(r.group)))
        if any(s.kind is SourceKind.DRA for s in self.config.sources):
            out.append(Informer(self.kube, RESOURCE_SLICES, decode_slice, on_slice))
        return out

    # -- the work -------------------------------------------------------------------------

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for inf in self.informers:
                tg.create_task(inf.run(), name=f"informer {inf.name}")
            for inf in self.informers:
                await inf.synced.wait()
            log.info("caches synced: %d nodes", len(self.cache.nodes))
            for src in self.sources:
                for w in src.watchers():
                    tg.create_task(w, name=f"input {src.name}")
            for src in self.sources:
                tg.create_task(self._source_loop(src), name=f"source {src.name}")
            tg.create_task(self._loop("status", self.cache.health, self._status), name="status")
            if self.exporter.wanted:
                tg.create_task(self._loop("export", self.cache.export, self._export), name="export")

    async def _source_loop(self, src: LiveSource) -> None:
        await src.inputs_synced()

        async def once() -> bool:
            started = time.perf_counter()
            try:
                found = await src.discover()
            except SOURCE_ERRORS as exc:
                self._source_failed(src, str(exc))
                return False
            except ApiError as exc:
                if exc.status == 0:
                    raise
                self._source_failed(src, str(exc))
                return False
            outcome = await self.reconciler.reconcile(src.config, found)
            if src.config.kind in (SourceKind.IBNETDISCOVER, SourceKind.UFM):
                self.status.set_link_issues(src.name, found.link_issues)
            self.metrics.reconcile_seconds.labels(src.name).observe(time.perf_counter() - started)
            if outcome.refused:
                self.last_errors[src.name] = "; ".join(outcome.refused)
            else:
                self.last_errors.pop(src.name, None)
                self.metrics.last_success.labels(src.name).set_to_current_time()
            if outcome.writes:
                log.info("source %s: %s", src.name, outcome.written)
            return outcome.retry

        # UFM with a URL has its own timer (its interval); polling it at every resync too
        # would ask the server more often than configured.
        own_timer = src.config.kind is SourceKind.UFM and src.config.url is not None
        await self._loop(
            f"source {src.name}", src.changed, once, resync=math.inf if own_timer else None
        )

    def _source_failed(self, src: LiveSource, why: str) -> None:
        self.metrics.source_errors.labels(src.name).inc()
        if self.last_errors.get(src.name) != why:
            log.warning(
                "source %s produced nothing usable, so nothing was written: %s", src.name, why
            )
        self.last_errors[src.name] = why

    async def _status(self) -> bool:
        await self.status.run_once()
        return False

    async def _export(self) -> bool:
        out = await self.exporter.run_once()
        for why in (*out.conflicts, *out.errors):
            log.warning("export: %s", why)
        return False

    async def _loop(
        self,
        name: str,
        signal: Signal,
        work: Callable[[], Awaitable[bool]],
        *,
        resync: float | None = None,
    ) -> None:
        """Run ``work`` on each change of ``signal`` and at least every ``resync`` seconds
        (None: the configuration's; ``math.inf``: never, for a source with its own timer);
        see the module doc.

        ``work`` returning True asks to run again soon (a write raced another). A refused
        request (a role missing, say) is logged and retried with back-off like an API
        server that is away: one broken source must not stop the others.
        """
        backoff = Backoff(initial=0.5, maximum=30.0)
        seen = -1
        quiet = self.config.debounce_seconds
        period = self.config.resync_seconds if resync is None else resync
        timeout = None if math.isinf(period) else period
        while True:
            if signal.generation == seen:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(signal.changed_since(seen), timeout=timeout)
            first = time.monotonic()
            while quiet > 0 and time.monotonic() - first < MAX_DELAY:
                mark = signal.generation
                await asyncio.sleep(quiet)
                if signal.generation == mark:
                    break
            seen = signal.generation
            try:
                again = await work()
            except (Unavailable, ApiError) as exc:
                delay = backoff.delay()
                log.warning("%s: %s; again in %.1f s", name, exc, delay)
                await asyncio.sleep(delay)
                seen = -1
                continue
            backoff.reset()
            self.metrics.passes.labels(name).inc()
            if again:
                await asyncio.sleep(RETRY_SOON)
                seen = -1


class ConfigWatch:
    """The configuration: ``fixed`` (from a file), or a ConfigMap key watched live."""

    def __init__(
        self,
        *,
        fixed: ControllerConfig | None = None,
        kube: Kube | None = None,
        namespace: str = "",
        name: str = "",
        key: str = "config.yaml",
    ) -> None:
        self.current: ControllerConfig | None = fixed
        self.changed = Signal()
        self.error = ""
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.key = key
        self.loaded = asyncio.Event()
        if fixed is not None:
            self.loaded.set()

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name} key {self.key}"

    def _on_event(self, event: Event[Mapping[str, Any]]) -> None:
        if event.type is EventType.DELETED or event.obj is None:
            self.error = f"{self.where}: the ConfigMap was deleted; keeping the running config"
            log.error("%s", self.error)
            return
        text = (event.obj.get("data") or {}).get(self.key)
        if text is None:
            self.error = f"{self.where}: no such key"
            log.error("%s", self.error)
            return
        try:
            config = config_from_text(str(text), self.where)
        except InputError as exc:
            self.error = str(exc)
            log.error("configuration not used (the running one is kept):\n%s", exc)
            return
        self.error = ""
        if config != self.current:
            self.current = config
            self.changed.set()
            self.loaded.set()

    async def run(self) -> None:
        if self.kube is None:
            await asyncio.Event().wait()  # a file: nothing to watch
            return
        informer: Informer[Mapping[str, Any]] = Informer(
            self.kube,
            CONFIGMAPS,
            decode=lambda raw: raw,
            on_event=self._on_event,
            namespace=self.namespace,
            field_selector=f"metadata.name={self.name}",
            name=self.where,
        )
        await informer.run()


async def run_with_config(
    watch: ConfigWatch,
    make: Callable[[ControllerConfig], Controller],
    on_start: Callable[[Controller], None] = lambda c: None,
) -> None:
    """Run a ``Controller`` for the current configuration; restart it when it changes."""
    await watch.loaded.wait()
    while True:
        assert watch.current is not None
        seen = watch.changed.generation
        controller = make(watch.current)
        on_start(controller)
        work = asyncio.create_task(controller.run(), name="controller")
        change = asyncio.create_task(watch.changed.changed_since(seen), name="config change")
        try:
            done, _ = await asyncio.wait({work, change}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
            if not work.done():
                work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
        if work in done:
            work.result()
            return
        log.info("configuration changed: restarting the work with it")
