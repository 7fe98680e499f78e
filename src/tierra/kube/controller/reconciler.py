"""One source's discovery, made true in the cluster: plan, guard, write, retry.

For every API group the configuration names:

1. ``reconcile.plan`` against the HyperNodes the cache holds (only objects labelled with
   the source's owner are ever changed; a same-named object of someone else's is a
   conflict, reported and left alone);
2. ``reconcile.guard_deletes``: a plan deleting more than ``guard.maxDeleteShare`` of the
   owner's objects is refused whole, counted and reported (unless
   ``guard.allowMassDelete``);
3. the writes, in plan order (children before parents on the way up, parents before
   children on the way down), those of one tier and action concurrently and the groups
   side by side: merge patches guarded by ``resourceVersion``; on 409 the object is read
   again and planned again (at most ``RETRIES`` times); an object the API server refuses
   outright (422, 403) is counted and skipped, the others still go; an API server that
   is away aborts the run, which is retried.

Every successful write's response goes into the cache at once, so a rerun right after
plans nothing even before the watch has caught up.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tierra.api.hypernode import HyperNode
from tierra.discovery import reconcile
from tierra.discovery.reconcile import Action, Change
from tierra.discovery.result import MANAGED_BY, Discovery
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.controller.admission import HINT as ADMISSION_HINT
from tierra.kube.controller.admission import admission_refusal
from tierra.kube.controller.cache import ControllerCache
from tierra.kube.controller.config import ControllerConfig, SourceConfig
from tierra.kube.controller.metrics import Metrics
from tierra.kube.controller.writes import create_body, delete_options, update_patch
from tierra.kube.resources import HYPERNODES, Resource

log = logging.getLogger(__name__)
RETRIES = 3
CONCURRENCY = 32
RESOURCE = {r.group: r for r in HYPERNODES}
Report = Callable[[str, str, str], None]  # (HyperNode name or "", reason, message)


class Unavailable(Exception):
    """The API server could not be reached; the whole run is retried later."""


@dataclass(slots=True)
class Outcome:
    """What one run of one source did, per group."""

    written: dict[str, dict[str, int]] = field(default_factory=dict)  # group -> action -> n
    conflicts: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retry: bool = False  # something raced: run again soon

    @property
    def writes(self) -> int:
        return sum(n for by in self.written.values() for n in by.values())


async def _bounded(calls: Sequence[Callable[[], Awaitable[None]]], limit: int) -> None:
    semaphore = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with semaphore:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        cache: ControllerCache,
        config: ControllerConfig,
        metrics: Metrics,
        report: Report | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.config = config
        self.metrics = metrics
        self.report = report or (lambda name, reason, message: None)
        self._admission_logged: set[str] = set()

    async def reconcile(self, source: SourceConfig, found: Discovery) -> Outcome:
        """Every group at once (they are independent objects)."""
        outcome = Outcome()
        await asyncio.gather(*(self._group(source, found, g, outcome) for g in self.config.groups))
        return outcome

    async def _group(
        self, source: SourceConfig, found: Discovery, group: str, outcome: Outcome
    ) -> None:
        plan = reconcile.plan(
            found.hypernodes,
            self.cache.hypernode_list(group),
            owner=source.owner,
            nodes=self.cache.node_list(),
            group=group,
        )
        refusal = (
            None
            if self.config.allow_mass_delete
            else reconcile.guard_deletes(plan, max_share=self.config.max_delete_share)
        )
        if refusal is not None:
            text = f"{group}: {refusal}"
            outcome.refused.append(text)
            self.metrics.refused.labels(source.owner, group).inc()
            self.report("", "DeleteRefused", text)
            log.warning("source %s: %s", source.owner, text)
            return
        for c in plan.conflicts:
            outcome.conflicts.append(f"{group}: HyperNode/{c.name}: {c.reason}")
            self.metrics.conflicts.labels(source.owner, group).inc()
            self.report(c.name, "TopologyConflict", c.reason)
        counts = outcome.written.setdefault(group, {})
        resource = RESOURCE[group]
        writes = [c for c in plan.changes if c.action is not Action.UNCHANGED]
        for _, batch in itertools.groupby(writes, key=lambda c: (c.action, _tier(c))):
            calls = [
                self._writer(resource, group, source, c, counts=counts, outcome=outcome)
                for c in batch
            ]
            await _bounded(calls, CONCURRENCY)

    def _writer(
        self,
        resource: Resource,
        group: str,
        source: SourceConfig,
        change: Change,
        *,
        counts: dict[str, int],
        outcome: Outcome,
    ) -> Callable[[], Awaitable[None]]:
        async def write() -> None:
            try:
                done = await self._write(resource, group, source, change)
            except ApiError as exc:
                self._note_admission(group, exc)
                if exc.status == 0 or exc.status >= 500:
                    raise Unavailable(str(exc)) from exc
                if exc.status == 409:
                    outcome.retry = True
                    return
                outcome.errors.append(str(exc))
                self.metrics.write_errors.labels(group, str(change.action)).inc()
                self.report(change.name, "WriteRefused", exc.message)
                log.warning("source %s: %s", source.owner, exc)
                return
            if done is None:
                outcome.retry = True
                return
            counts[done] = counts.get(done, 0) + 1
            self.metrics.objects.labels(source.owner, group, done).inc()

        return write

    def _note_admission(self, group: str, exc: ApiError) -> None:
        cause = admission_refusal(exc)
        if cause is None:
            return
        self.metrics.admission_refused.labels(group, cause).inc()
        if cause not in self._admission_logged:
            self._admission_logged.add(cause)
            log.warning(ADMISSION_HINT.format(cause=cause, message=exc.message))

    async def _write(
        self, resource: Resource, group: str, source: SourceConfig, change: Change
    ) -> str | None:
        """Carry out ``change``; the action done, or None when it should be planned again."""
        for _ in range(RETRIES):
            if change.action is Action.CREATE:
                assert change.desired is not None
                body = await self.kube.request(
                    "POST",
                    resource.path(),
                    body=create_body(change.desired, group),
                    what=f"create {group} HyperNode/{change.name}",
                )
                self._remember(body)
                return "create"
            stored = self.cache.hypernodes[group].get(change.name)
            rv = stored.resource_version if stored else ""
            try:
                if change.action is Action.UPDATE:
                    body = await self.kube.request(
                        "PATCH",
                        resource.path(name=change.name),
                        body=update_patch(change, group, rv),
                        content_type=MERGE_PATCH,
                        what=f"update {group} HyperNode/{change.name}",
                    )
                    self._remember(body)
                    return "update"
                await self.kube.request(
                    "DELETE",
                    resource.path(name=change.name),
                    body=delete_options(rv),
                    what=f"delete {group} HyperNode/{change.name}",
                )
                self.cache.remove_hypernode(group, change.name, primary=self.config.primary_group)
                return "delete"
            except ApiError as exc:
                if exc.status == 404 and change.action is Action.DELETE:
                    self.cache.remove_hypernode(
                        group, change.name, primary=self.config.primary_group
                    )
                    return "delete"
                if exc.status != 409:
                    raise
            replanned = await self._replan(resource, group, source, change)
            if replanned is None:
                return None
            change = replanned
        return None

    async def _replan(
        self, resource: Resource, group: str, source: SourceConfig, change: Change
    ) -> Change | None:
        """``change`` again over the object as it is now (after a 409)."""
        try:
            raw = await self.kube.get(
                resource.path(name=change.name), what=f"read HyperNode/{change.name}"
            )
        except ApiError as exc:
            if exc.status == 404:
                self.cache.remove_hypernode(group, change.name, primary=self.config.primary_group)
                return None
            raise
        fresh = self._remember(raw)
        if fresh is None or fresh.meta.labels.get(MANAGED_BY) != source.owner:
            return None  # someone else took it: the next run reports the conflict
        want = [change.desired] if change.desired is not None else []
        plan = reconcile.plan(want, [fresh], owner=source.owner, group=group)
        todo = [c for c in plan.changes if c.action is not Action.UNCHANGED]
        return todo[0] if todo else None

    def _remember(self, raw: object) -> HyperNode | None:
        if not isinstance(raw, dict):
            return None
        stored = self.cache.decode(raw)
        self.cache.upsert_hypernode(stored, primary=self.config.primary_group)
        return stored.hypernode


def _tier(c: Change) -> int:
    hn = c.desired or c.existing
    return hn.tier if hn is not None else 0
