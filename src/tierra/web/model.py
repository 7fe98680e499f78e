"""The dashboard's state: one store of objects, the view over it, and a version.

Everything the JSON API returns is read from here. A source (a snapshot, or informers
in live mode) feeds ``upsert`` / ``remove``; each call updates the view in
place where it can (see ``view.py``), bumps ``version`` when anything changed, and tells
the listeners (the server's event stream), so an open page refetches what it shows.
Reads are cached per version: the same version always gives the same documents.

Scheduling analysis (why a gang waits) runs on the scheduler cache ``dryrun.py`` keeps
beside the store, fed the same changes: a server runs it in a worker thread while events
keep arriving, and it is kept with the version it was computed for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.snapshot import Snapshot
from tierra.errors import Problem, Severity
from tierra.scheduler import SchedulerConfig
from tierra.web.devices import DeviceRoom
from tierra.web.dryrun import DryRuns
from tierra.web.gangs import Analysis, Gangs
from tierra.web.store import Change, Kind, Object, Store
from tierra.web.view import TopologyView

SEARCH_LIMIT = 20  # matches per kind


@dataclass(slots=True)
class Source:
    """Where the objects come from, as the page's header says it."""

    mode: str  # "snapshot" | "live"
    description: str
    state: dict[str, Any] = field(default_factory=dict)  # live: synced, errors


class Dashboard:
    def __init__(
        self,
        store: Store,
        *,
        source: Source,
        config: SchedulerConfig | None = None,
        report: Path | None = None,
        devices: DeviceRoom | None = None,
    ) -> None:
        self.store = store
        self.source = source
        self.config = config or SchedulerConfig()
        self.report = report
        self.version = 1
        self.listeners: list[Callable[[int], None]] = []
        self._view: TopologyView | None = None
        self.devices = devices or DeviceRoom()  # DRA, for the dry runs (web/devices.py)
        for pg in store.podgroups.values():
            self.devices.podgroup(pg)
        self.dry = DryRuns(store, self.config, self.devices)
        self.dry.note((), self.version, hypernodes=False)
        self._analysis: tuple[int, Analysis] | None = None
        self._cache: dict[str, Any] = {}

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, **kw: Any) -> Dashboard:
        return cls(Store(snapshot), devices=DeviceRoom.of(snapshot), **kw)

    # -- updates ------------------------------------------------------------------------

    def upsert(self, obj: Object, problems: Iterable[Problem] = ()) -> bool:
        change = self.store.upsert(obj, problems)
        if change is not None and isinstance(obj, PodGroup):
            self.devices.podgroup(obj)
        return self.apply([change] if change else [])

    def remove(self, kind: Kind, key: str) -> bool:
        change = self.store.remove(kind, key)
        if change is not None and isinstance(change.old, PodGroup):
            self.devices.podgroup(change.old, removed=True)
        return self.apply([change] if change else [])

    def devices_changed(self) -> None:
        """Live mode: a DRA object changed (``web/devices.py``): reasons may differ."""
        self._bump()

    def apply(self, changes: list[Change]) -> bool:
        """Bring the view up to date with ``changes``; False when nothing changed."""
        if not changes:
            return False
        view = self._view
        for c in changes:
            if view is None:
                break
            if c.kind is Kind.NODE:
                ok = view.node_changed(cast(Node | None, c.old), cast(Node | None, c.new))
            elif c.kind is Kind.POD:
                ok = view.pod_changed(cast(Pod | None, c.old), cast(Pod | None, c.new))
            else:
                ok = c.kind is not Kind.HYPERNODE  # PodGroups, Queues: nothing drawn from them
            if not ok:
                view = None
        self._view = view
        self._bump(changes)
        return True

    def note_source(self, **state: Any) -> None:
        """Live mode: the connection's state (synced, an error) changed; the page shows it."""
        if state != {k: self.source.state.get(k) for k in state}:
            self.source.state.update(state)
            self._bump()

    def _bump(self, changes: Sequence[Change] = ()) -> None:
        self.version += 1
        moved = any(c.kind is Kind.HYPERNODE for c in changes)
        self.dry.note(changes, self.version, hypernodes=moved)
        self._cache.clear()
        for listener in list(self.listeners):
            listener(self.version)

    def warm(self) -> None:
        """Build the view, the scheduler cache, the first dry run and the first page's
        documents (the gang table included) now, before serving: the first visitor
        waits for none of them, and the page's requests do not compete with them."""
        self.summary_doc()
        self.topology_doc()
        self.hypernode_doc(self.view.index.names[self.view.index.root])
        self.analyse()
        self.gangs_doc()

    # -- what reads share ---------------------------------------------------------------

    @property
    def view(self) -> TopologyView:
        if self._view is None:
            self._view = TopologyView(self.store)
        return self._view

    @property
    def analysis(self) -> Analysis | None:
        """The latest session dry run (perhaps of an older version: see ``analysed``)."""
        return self._analysis[1] if self._analysis is not None else None

    @property
    def analysed(self) -> int:
        """The version the latest dry run is of (0: none yet)."""
        return self._analysis[0] if self._analysis is not None else 0

    def keep_analysis(self, version: int, analysis: Analysis) -> None:
        if version >= self.analysed:
            self._analysis = (version, analysis)
            self._cache.pop("gangs", None)

    def analyse(self) -> Analysis:
        """Run the dry run here and now if the latest is stale (a server uses a thread)."""
        if self.analysed != self.version or self.analysis is None:
            self.keep_analysis(*self.dry.analyse())
        assert self.analysis is not None
        return self.analysis

    def gangs(self) -> Gangs:
        return Gangs(self.store, self.view, self.config, self.analysis)

    def _cached(self, key: str, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = {"version": self.version, **build()}
        return dict(found)

    # -- documents (the JSON API) -------------------------------------------------------

    def summary_doc(self) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            store, view = self.store, self.view
            ix, f = view.index, view.figures
            problems = [p for p in store.problems if p.severity is Severity.ERROR]
            pending = sum(1 for p in store.pods.values() if not p.bound and not p.terminated)
            return {
                "source": {
                    "mode": self.source.mode,
                    "description": self.source.description,
                    **self.source.state,
                },
                "schedulerNames": list(self.config.scheduler_names),
                "counts": {
                    "nodes": len(ix.node_names),
                    "hyperNodes": ix.root,
                    "trees": len(ix.trees),
                    "unusableTrees": sum(1 for t in ix.trees if not t.usable),
                    "pods": len(store.pods),
                    "pendingPods": pending,
                    "podGroups": len(store.podgroups),
                    "queues": len(store.queues),
                },
                "metric": {
                    **view.metric_doc(),
                    "total": float(f.total[ix.root]),
                    "used": float(f.used[ix.root]),
                    "unavailable": float(f.unavailable[ix.root]),
                },
                "problems": [str(p) for p in problems[:50]],
                "problemCount": len(problems),
                "report": self.report is not None,
            }

        return self._cached("summary", build)

    def topology_doc(self) -> dict[str, Any]:
        return self._cached("topology", self.view.topology_doc)

    def hypernode_doc(self, name: str) -> dict[str, Any] | None:
        h = self.view.index.find(name)  # its name, or group/name
        if h is None:
            return None
        return self._cached(f"hypernode/{name}", lambda: self.view.hypernode_doc(h))

    def node_doc(self, name: str) -> dict[str, Any] | None:
        view = self.view
        n = view.index.node_ix.get(name)
        if n is None:
            return None
        pods = [self.store.pods[k] for k in view.pods_on[n] if k in self.store.pods]
        doc = {"version": self.version, **view.node_doc(name, pods)}
        inside = self.devices.inside(self.store.nodes[name])
        if inside is not None:
            doc["inside"] = inside  # its devices' domains (web/devices.py)
        return doc

    def gangs_doc(self) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            return {"analysedVersion": self.analysed, "gangs": self.gangs().rows()}

        return self._cached("gangs", build)

    def gang_doc(self, key: str) -> dict[str, Any] | None:
        found = self.gangs().detail(key)
        if found is None:
            return None
        return {"version": self.version, "analysedVersion": self.analysed, **found}

    def search(self, query: str) -> dict[str, Any]:
        """Nodes, HyperNodes and gangs whose names contain ``query`` (case-insensitive)."""
        q = query.strip().lower()
        view = self.view
        ix = view.index

        def hits(names: Iterable[str]) -> list[str]:
            out = []
            for n in names:
                if q in n.lower():
                    out.append(n)
                    if len(out) >= SEARCH_LIMIT:
                        break
            return out

        if not q:
            return {"query": query, "nodes": [], "hyperNodes": [], "gangs": []}
        nodes = hits(ix.node_names)
        return {
            "query": query,
            "nodes": [{"name": n, "leaves": [ix.names[d] for d in ix.leaves_of(n)]} for n in nodes],
            "hyperNodes": hits(ix.names[: ix.root]),
            "gangs": hits(self.gangs().keys()),
        }
