"""The status pass: every HyperNode's status recomputed from the Nodes, changed ones written.

Runs whenever the cache's ``health`` signal fires (a Node's readiness, cordon, taints or
labels; a HyperNode's spec; new link problems from a fabric source), a short quiet
period after the last change so a burst becomes one pass. The roll-up covers every
HyperNode of each status group, tierra's and hand-made alike: health is a fact about
the nodes, whoever drew the domain. Writes go to the ``status`` subresource (the only
part of a HyperNode the controller changes on objects it does not own), concurrently,
and only for HyperNodes whose status changed (``status_patch.status_patch``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from tierra.api.hypernode import HyperNode
from tierra.discovery import health
from tierra.discovery.result import LinkIssue
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.controller.cache import ControllerCache
from tierra.kube.controller.metrics import Metrics
from tierra.kube.controller.status_patch import status_patch
from tierra.kube.resources import HYPERNODES
from tierra.topology.index import TopologyIndex

log = logging.getLogger(__name__)
CONCURRENCY = 32
RESOURCE = {r.group: r for r in HYPERNODES}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parents_of(hypernodes: Sequence[HyperNode]) -> dict[str, str]:
    """Each HyperNode's parent by name (top-level ones left out), as the index links them."""
    index = TopologyIndex.build((), hypernodes)
    return {
        index.names[h]: index.names[p]
        for h, p in enumerate(index.parent.tolist())
        if h != index.root and 0 <= p != index.root
    }


class StatusWriter:
    def __init__(
        self,
        kube: Kube,
        cache: ControllerCache,
        groups: Sequence[str],
        metrics: Metrics,
        *,
        primary: str,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.groups = tuple(groups)
        self.metrics = metrics
        self.primary = primary
        self.link_issues: dict[str, tuple[LinkIssue, ...]] = {}  # source -> its latest
        self._tiers: dict[str, set[int]] = {}

    def set_link_issues(self, source: str, issues: Sequence[LinkIssue]) -> None:
        if tuple(issues) != self.link_issues.get(source, ()):
            self.link_issues[source] = tuple(issues)
            self.cache.health.set()

    async def run_once(self) -> int:
        """One pass over every status group; the number of statuses written."""
        written = 0
        nodes = self.cache.node_list()
        issues = [i for per in self.link_issues.values() for i in per]
        for group in self.groups:
            stored = self.cache.hypernodes[group]
            if not stored:
                self._gauges(group, [])
                continue
            rolled = health.rollup([s.hypernode for s in stored.values()], nodes, issues)
            self._gauges(group, rolled)
            parents = parents_of(rolled)
            now = now_rfc3339()
            todo = []
            for hn in rolled:
                s = stored.get(hn.name)
                if s is None:
                    continue
                parent = parents.get(hn.name, "")
                patch = status_patch(hn.status, s, group, now, parent=parent)
                if patch is not None:
                    todo.append((hn.name, patch))
            written += await self._write(group, todo)
        return written

    def _gauges(self, group: str, rolled: Sequence[HyperNode]) -> None:
        tiers = Counter(hn.tier for hn in rolled)
        unhealthy = {u.name for hn in rolled for u in hn.status.unhealthy_nodes}
        for gone in self._tiers.get(group, set()) - set(tiers):
            self.metrics.hypernodes.remove(group, str(gone))
        self._tiers[group] = set(tiers)
        for tier, n in tiers.items():
            self.metrics.hypernodes.labels(group, str(tier)).set(n)
        self.metrics.unhealthy_nodes.labels(group).set(len(unhealthy))

    async def _write(self, group: str, todo: Sequence[tuple[str, Mapping[str, object]]]) -> int:
        resource = RESOURCE[group]
        semaphore = asyncio.Semaphore(CONCURRENCY)
        done = 0

        async def one(name: str, patch: Mapping[str, object]) -> None:
            nonlocal done
            async with semaphore:
                try:
                    raw = await self.kube.request(
                        "PATCH",
                        resource.path(name=name, subresource="status"),
                        body=patch,
                        content_type=MERGE_PATCH,
                        what=f"status of {group} HyperNode/{name}",
                    )
                except ApiError as exc:
                    if exc.status == 404:
                        return  # deleted meanwhile
                    if exc.status == 0:
                        raise
                    self.metrics.write_errors.labels(group, "status").inc()
                    log.warning("%s", exc)
                    return
            if isinstance(raw, dict):
                stored = self.cache.decode(raw)
                self.cache.upsert_hypernode(stored, primary=self.primary)
            done += 1
            self.metrics.status_writes.labels(group).inc()

        await asyncio.gather(*(one(n, p) for n, p in todo))
        return done
