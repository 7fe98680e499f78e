"""List-then-watch one resource, handing each change to a callback as a decoded object.

What it does, in client-go's terms (a reflector without a store):

* a paginated LIST (``limit``, ``continue``), then a WATCH from the list's
  ``resourceVersion`` with ``allowWatchBookmarks``, resumed from the last version seen
  whenever the server ends it (its ``timeoutSeconds``, a load balancer's idle timeout);
* 410 Gone (the version was compacted away, on the watch or on a ``continue`` token) makes
  it relist, and the relist reports what changed meanwhile, deletions included;
* while the API server is away it retries with bounded exponential back-off and jitter,
  and resumes from where it was, so nothing is lost or doubled;
* ``synced`` is set once the first LIST has been delivered: readiness waits on it.

Raw dictionaries are decoded by ``decode`` as they arrive and dropped; the informer keeps
only each object's key and resourceVersion (to report deletions found by a relist and to
skip objects a relist shows unchanged). The consumer's cache is the only copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tierra.kube import wire
from tierra.kube.client import TRANSPORT_ERRORS, ApiError, Kube, decode_json
from tierra.kube.resources import Resource

T = TypeVar("T")
log = logging.getLogger(__name__)


class EventType(enum.StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Event(Generic[T]):
    """One change. ``obj`` is the decoded object; None for a deletion found by a relist
    (the object is gone and was never kept)."""

    type: EventType
    key: str
    obj: T | None


_JITTER = random.Random()  # shared: seeding a Random per back-off costs more than a bind


@dataclass(slots=True)
class Backoff:
    """Exponential back-off with jitter: ``initial`` doubling up to ``maximum`` seconds."""

    initial: float = 0.2
    maximum: float = 5.0
    factor: float = 2.0
    jitter: float = 0.3
    rng: random.Random = field(default_factory=lambda: _JITTER)
    _next: float = 0.0

    def delay(self) -> float:
        base = self._next or self.initial
        self._next = min(self.maximum, base * self.factor)
        return base * (1 + self.jitter * (2 * self.rng.random() - 1))

    def reset(self) -> None:
        self._next = 0.0


class _Gone(Exception):
    """The resourceVersion is too old: relist."""


@dataclass(slots=True)
class InformerStats:
    lists: int = 0
    watches: int = 0
    relists_gone: int = 0
    errors: int = 0
    events: int = 0
    bookmarks: int = 0
    last_error: str = ""


class Informer(Generic[T]):
    """Keeps ``on_event`` told about every object of ``resource``; run with ``run()``.

    ``decode`` turns a raw object into the consumer's type; if it raises, the object is
    logged by name and left out (the informer never stops over one bad object).
    ``on_event`` is called in the event loop, one event at a time, in server order.
    ``on_list(True)`` / ``on_list(False)`` bracket the delivery of a whole LIST, so a
    consumer can batch the updates a (re)list brings. ``lean``: objects are decoded off
    the wire with only the metadata the lean decoders read (``tierra.kube.wire``: Pods
    and Nodes, whose ``managedFields`` cost half of their JSON decoding).
    """

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        decode: Callable[[dict[str, Any]], T],
        on_event: Callable[[Event[T]], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        on_list: Callable[[bool], None] | None = None,
        name: str = "",
        lean: bool = False,
    ) -> None:
        self.kube = kube
        self.resource = resource
        self.decode = decode
        self.on_event = on_event
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.on_list = on_list
        self.name = name or resource.name
        self.lean = lean
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.stats = InformerStats()
        self.connected = False
        self._known: dict[str, str] = {}  # key -> resourceVersion
        self._rng = random.Random(hash(self.name))

    @property
    def path(self) -> str:
        return self.resource.path(self.namespace)

    def _selectors(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector, "fieldSelector": self.field_selector}

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch, forever (until cancelled)."""
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                await self._watch()
                self.backoff.reset()
            except _Gone:
                self.stats.relists_gone += 1
                log.info(
                    "%s: resourceVersion %s expired; relisting", self.name, self.resource_version
                )
                self.resource_version = ""
            except ApiError as exc:
                await self._failed(str(exc))
            except TRANSPORT_ERRORS as exc:
                await self._failed(f"{self.name}: connection lost: {exc or type(exc).__name__}")

    async def _failed(self, why: str) -> None:
        self.connected = False
        self.stats.errors += 1
        self.stats.last_error = why
        delay = self.backoff.delay()
        log.warning("%s; retrying in %.1f s", why, delay)
        await asyncio.sleep(delay)

    async def _list(self) -> None:
        """One paginated LIST, delivered page by page; deletions found at the end."""
        if self.on_list is not None:
            self.on_list(True)
        try:
            await self._list_pages()
        finally:
            if self.on_list is not None:
                self.on_list(False)

    async def _list_pages(self) -> None:
        """Pages are fetched one ahead: while this process decodes and delivers a page,
        the API server is already serializing the next (two cores instead of taking
        turns; at a million pods the server's share is seconds)."""
        seen: set[str] = set()
        version = ""
        ahead = asyncio.ensure_future(self._page(None))
        try:
            while True:
                body = await ahead
                self.connected = True
                meta = body.get("metadata") or {}
                version = str(meta.get("resourceVersion") or version)
                token = meta.get("continue") or None
                if token:
                    ahead = asyncio.ensure_future(self._page(token))
                items = body.get("items") or []
                body = None
                for raw in items:
                    self._deliver(raw, seen)
                del items
                if not token:
                    break
        finally:  # a page fetched ahead of a failure is dropped, its error with it
            ahead.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApiError, _Gone, *TRANSPORT_ERRORS):
                await ahead
        for key in [k for k in self._known if k not in seen]:
            del self._known[key]
            self._emit(Event(EventType.DELETED, key, None))
        self.resource_version = version
        self.stats.lists += 1
        self.backoff.reset()
        self.synced.set()

    async def _page(self, token: str | None) -> Any:
        query = {"limit": self.page_size, "continue": token, **self._selectors()}
        what = f"list {self.name}"
        try:
            if self.lean:
                return wire.decode_page(
                    await self.kube.request_bytes("GET", self.path, query=query, what=what),
                    pods=self.resource.kind == "Pod",
                )
            return await self.kube.get(self.path, query=query, what=what)
        except ApiError as exc:
            if exc.status == 410:  # the continue token expired: start over
                raise _Gone from None
            raise

    def _deliver(self, raw: dict[str, Any], seen: set[str]) -> None:
        key = self.resource.key(raw)
        seen.add(key)
        rv = str((raw.get("metadata") or {}).get("resourceVersion", ""))
        old = self._known.get(key)
        if old == rv:
            return
        obj = self._decode(raw)
        if obj is None:
            return
        self._known[key] = rv
        self._emit(Event(EventType.ADDED if old is None else EventType.MODIFIED, key, obj))

    def _decode(self, raw: dict[str, Any]) -> T | None:
        try:
            return self.decode(raw)
        except Exception as exc:  # one bad object must not stop the informer
            log.warning("%s: cannot use %s: %s", self.name, self.resource.key(raw), exc)
            return None

    def _emit(self, event: Event[T]) -> None:
        self.stats.events += 1
        try:
            self.on_event(event)
        except Exception:
            log.exception("%s: handler failed on %s %s", self.name, event.type, event.key)

    async def _watch(self) -> None:
        """One watch request, from ``resource_version`` until the server ends it."""
        timeout = self.watch_timeout + int(self._rng.random() * self.watch_timeout)
        query = {
            "watch": True,
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
            **self._selectors(),
        }
        self.stats.watches += 1
        try:
            async with self.kube.stream(
                self.path, query=query, read_timeout=timeout + 30, what=f"watch {self.name}"
            ) as lines:
                self.connected = True
                self.backoff.reset()
                async for line in lines:
                    if line.strip():
                        self._on_line(line)
        except ApiError as exc:
            if exc.status == 410:
                raise _Gone from None
            raise

    def _on_line(self, line: bytes) -> None:
        event = (
            wire.decode_event(line, pods=self.resource.kind == "Pod")
            if self.lean
            else decode_json(line)
        )
        kind = event.get("type")
        raw = event.get("object") or {}
        if kind == "ERROR":
            code = raw.get("code")
            if code == 410:
                raise _Gone
            raise ApiError(
                int(code or 0) or 500,
                str(raw.get("reason", "")),
                str(raw.get("message", "")),
                f"watch {self.name}",
            )
        rv = str((raw.get("metadata") or {}).get("resourceVersion", ""))
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            self.resource_version = rv or self.resource_version
            return
        key = self.resource.key(raw)
        if kind == "DELETED":
            self._known.pop(key, None)
            self._emit(Event(EventType.DELETED, key, self._decode(raw)))
        elif kind in ("ADDED", "MODIFIED"):
            obj = self._decode(raw)
            if obj is not None:
                old = self._known.get(key)
                self._known[key] = rv
                self._emit(Event(EventType.ADDED if old is None else EventType.MODIFIED, key, obj))
        self.resource_version = rv or self.resource_version


async def wait_synced(
    informers: Mapping[str, Informer[Any]] | list[Informer[Any]], timeout: float | None = None
) -> None:
    """Wait until every informer has delivered its first LIST."""
    items = list(informers.values()) if isinstance(informers, Mapping) else informers
    await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in items)), timeout)
