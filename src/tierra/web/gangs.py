"""Gangs as the dashboard shows them: where each runs, and why each pending one waits.

Where a gang runs is read from the cluster (its bound pods, the lowest domain holding
them all). Why a pending gang waits is what a scheduling session would decide now: the
dashboard runs one as a dry run (``dryrun.py``; nothing is bound or written) and shows,
from its ``Analysis``, each waiting gang's reason, or the domain a session would bind
it in. ``explanation_doc`` is ``tierra explain`` for one gang, candidates ranked and cut
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tierra.api.hypernode import named
from tierra.api.natural import natural_key
from tierra.api.pod import Pod
from tierra.api.podgroup import WORKLOAD_WORDS, NetworkTopology, PodGroup
from tierra.api.workload import topology_key
from tierra.scheduler import Explanation, SchedulerConfig, SessionResult, TierTrace
from tierra.scheduler.explain.reasons import best_first, tally
from tierra.web.store import Store, gang_of
from tierra.web.view import TopologyView

STATUS_ORDER = {"pending": 0, "partial": 1, "running": 2, "finished": 3, "empty": 4}


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one scheduling session would do now, per gang."""

    waiting: Mapping[str, str]  # gang key -> the reason it waits
    placeable: Mapping[str, str]  # gang key -> the HyperNode a session would bind it in
    evictions: int

    @classmethod
    def of(cls, result: SessionResult, pods: Mapping[str, Pod]) -> Analysis:
        """A dry run's decisions, per gang (``pods``: the cache's, by key)."""
        placeable: dict[str, str] = {}
        for b in result.bindings:
            pod = pods.get(b.pod)
            if pod is not None:
                placeable.setdefault(gang_of(pod), b.hypernode or "the whole cluster")
        return cls(
            waiting={u.podgroup: u.reason for u in result.unschedulable},
            placeable=placeable,
            evictions=len(result.evictions),
        )


def _preferred_text(nt: NetworkTopology) -> list[str]:
    """The preferred tier as written: tierra's annotation, or Volcano's spec field."""
    value = nt.preferred_tier_allowed
    if value is None and nt.preferred_tier_name is None:
        return []
    if nt.preferred_from is not None:
        return [f"{nt.preferred_from}: {value if value is not None else nt.preferred_tier_name}"]
    if value is not None:
        return [f"preferredTierAllowed: {value}"]
    return [f"preferredTierName: {nt.preferred_tier_name}"]


def constraint_text(nt: NetworkTopology | None) -> str:
    """A PodGroup's ``networkTopology`` the way a person reads it."""
    if nt is None:
        return "none"
    parts = [str(nt.mode)]
    if nt.highest_tier_allowed is not None:
        parts.append(f"highestTierAllowed: {nt.highest_tier_allowed}")
    if nt.highest_tier_name is not None:
        parts.append(f"highestTierName: {nt.highest_tier_name}")
    return ", ".join([*parts, *_preferred_text(nt)])


def podgroup_constraint(pg: PodGroup | None) -> str:
    """The constraint in the words of the PodGroup's own API: an upstream PodGroup's
    ``schedulingConstraints.topology`` key and tierra's annotations, never the Volcano
    fields they are read into."""
    if pg is None or pg.api is not WORKLOAD_WORDS:
        return constraint_text(pg.network_topology if pg is not None else None)
    key = topology_key(pg)
    nt = pg.network_topology
    parts = [f"topology key: {key}"] if key is not None else []
    parts += _preferred_text(nt) if nt is not None else []
    return ", ".join(parts) or "none"


class Gangs:
    """Gang rows and details over one store and view, with an optional analysis."""

    def __init__(
        self,
        store: Store,
        view: TopologyView,
        config: SchedulerConfig,
        analysis: Analysis | None,
    ) -> None:
        self.store, self.view, self.config, self.analysis = store, view, config, analysis

    def keys(self) -> list[str]:
        """PodGroups, gangs named by pods, and pending lone pods of our schedulers."""
        store = self.store
        found = set(store.podgroups)
        for gang, pods in store.members.items():
            if gang in found:
                continue
            first = store.pods[next(iter(pods))]
            if first.group_name or self._ours_pending(first):
                found.add(gang)
        return sorted(found)

    def _ours_pending(self, pod: Pod) -> bool:
        return (
            not pod.bound
            and not pod.terminated
            and pod.scheduler_name in self.config.scheduler_names
        )

    def pods(self, key: str) -> list[Pod]:
        return [self.store.pods[k] for k in self.store.members.get(key, {})]

    def row(self, key: str) -> dict[str, Any]:
        store, view = self.store, self.view
        pg: PodGroup | None = store.podgroups.get(key)
        pods = self.pods(key)
        bound = [p for p in pods if p.bound and not p.terminated]
        pending = [p for p in pods if not p.bound and not p.terminated]
        finished = len(pods) - len(bound) - len(pending)
        if not pods:
            status = "empty"
        elif not bound and not pending:
            status = "finished"
        elif pending:
            status = "partial" if bound else "pending"
        else:
            status = "running"
        common = view.achieved.get(key)
        achieved = None
        if common is not None:
            ix = view.index
            achieved = {
                **named(ix.names[common]),
                "tier": int(ix.tier[common]),
                "tierName": "" if common == ix.root else ix.hypernodes[common].tier_name or "",
            }
        row: dict[str, Any] = {
            "key": key,
            "kind": "Pod" if pg is None and pods and not pods[0].group_name else "PodGroup",
            "queue": pg.queue if pg is not None else "",
            "minMember": pg.min_member if pg is not None else len(pods),
            # the field as the PodGroup's own API names it (minCount for an upstream one)
            "minimumField": pg.api.min_member if pg is not None else "minMember",
            "pods": {
                "total": len(pods),
                "bound": len(bound),
                "pending": len(pending),
                "finished": finished,
            },
            "status": status,
            "constraint": podgroup_constraint(pg),
            "subGroups": [
                {
                    "name": s.name,
                    "size": s.sub_group_size,
                    "constraint": constraint_text(s.network_topology),
                }
                for s in (pg.sub_group_policies if pg is not None else ())
            ],
            "achieved": achieved,
            "reason": None,
            "wouldPlace": None,
        }
        if pending:
            schedulers = sorted({p.scheduler_name for p in pending})
            ours = [s for s in schedulers if s in self.config.scheduler_names]
            if not ours:
                row["reason"] = (
                    f"not scheduled by tierra here: spec.schedulerName {', '.join(schedulers)}"
                    f" (the dashboard's scheduler names: {', '.join(self.config.scheduler_names)})"
                )
            elif self.analysis is not None:
                row["reason"] = self.analysis.waiting.get(key)
                row["wouldPlace"] = self.analysis.placeable.get(key)
        return row

    def rows(self) -> list[dict[str, Any]]:
        out = [self.row(k) for k in self.keys()]
        out.sort(key=lambda r: (STATUS_ORDER[r["status"]], r["key"]))
        return out

    def detail(self, key: str) -> dict[str, Any] | None:
        """A gang's row with its pods, their nodes, and every domain holding them."""
        if key not in self.store.podgroups and key not in self.store.members:
            return None
        view = self.view
        ix = view.index
        doc = self.row(key)
        pods = sorted(self.pods(key), key=lambda p: natural_key(p.key))
        doc["podList"] = [
            {"key": p.key, "node": p.node_name or None, "phase": str(p.phase)} for p in pods
        ]
        held = [view.held[p.key][0] for p in pods if p.key in view.held]
        doc["nodes"] = sorted({ix.node_names[n] for n in held})
        per_domain: dict[int, int] = {}
        for n in held:
            for d in ix.domains_of(n).tolist():
                if d != ix.root:
                    per_domain[d] = per_domain.get(d, 0) + 1
        lowest_first = sorted(
            per_domain.items(), key=lambda dc: (int(ix.tier[dc[0]]), ix.names[dc[0]])
        )
        doc["domains"] = {ix.names[d]: c for d, c in lowest_first}
        return doc


def explanation_doc(exp: Explanation, show: int) -> dict[str, Any]:
    doc = exp.to_dict()
    doc["tiers"] = [_tier_doc(tt, show) for tt in exp.tiers]
    return doc


def _tier_doc(tt: TierTrace, show: int) -> dict[str, Any]:
    ranked = best_first(tt.resolved())
    rest = ranked[show:]
    return {
        "tier": tt.tier,
        "scope": tt.scope,
        "candidates": [v.to_dict() for v in ranked[:show]],
        "more": len(rest),
        "moreKinds": [[k, n] for k, n in tally(rest).most_common()],
    }
