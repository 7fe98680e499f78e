"""The webhook's decisions: admit this object, given the objects that already exist.

Pure: no client, no server. The webhook's informers feed the ``Judge`` every HyperNode
of both groups; a request is judged against that view, with the same rules and words
as ``tierra validate``:

* **HyperNode** (either group, judged against the HyperNodes of its own group: each
  group is its own forest and name space, read by its own scheduler; a name the other
  group also holds, not as the controller's mirror, is admitted with a warning that
  these are two HyperNodes). Schema problems (a bad regex, two
  selectors in one member, a tier above int32) are refused outright. Graph problems
  (a cycle, a second parent, a tier not above a child's, a tier name meaning two tiers
  in one tree, a node in two leaves of one tree) are refused when this write *adds* them:
  the problems of the forest with the new object, minus those it already had. A forest
  that is already broken somewhere else does not block unrelated writes, and a write
  that repairs part of it is welcome.
* **Pod**: only Kueue's keys: its topology annotations (``tierra.api.kueue``), refused
  when malformed or naming a level no node carries, warned when the pod's PodGroup also
  sets Volcano's ``networkTopology`` (that one is the gang's limit; the informers keep
  which PodGroups do); and its plain pod group keys (``tierra.api.kueue_pod_group``),
  refused as Kueue's own webhook refuses them (a name without a count, a count that is
  not an integer of at least 1, an index at or above the count). Registered for pods
  carrying a ``kueue.x-k8s.io/podset-`` or ``kueue.x-k8s.io/pod-group-`` annotation or
  a ``kueue.x-k8s.io/pod-group-`` label.
* **PodGroup**, Volcano's (``scheduling.volcano.sh``) or the upstream Workload API's
  (``scheduling.k8s.io/v1alpha2``, whose topology is a node-label key: resolved as
  ``tierra.api.workload`` resolves it, through HyperNodes discovered from that label or
  else the nodes' own labels): judged by ``scheduler.refusals.podgroup_refusals``, as
  ``tierra validate`` judges a PodGroup without pods. Refused when malformed or when its
  topology cannot be honoured (a tier name or label key nothing carries, a hard tier
  limit below every domain); admitted with a warning when no domain its limit allows
  could hold its minimum (``minMember`` pods, ``minResources``) even with every node
  empty, as ``validate`` warns: nodes can be added, and a refused PodGroup would keep
  its pods from ever asking for them.

* **DRA** (``devices.py``): ResourceClaims and templates naming a DeviceClass that does
  not exist or a selector that does not compile are refused, as ``tierra validate``
  reports them; a PodGroup sharing such a claim (``spec.resourceClaims``) too.

The Nodes the informers deliver (no pods: every node empty) are what a PodGroup is
measured against. HyperNode members written as regexes or label selectors also resolve
against node labels, which change without any HyperNode being written, so admission
does not judge overlaps through them; ``tierra validate`` and the controller's
reconcile report those.

The informers lag the API server by milliseconds, so ``kubectl apply`` of a file with
many HyperNodes would otherwise judge each against a view missing the previous ones.
An admitted (non-dry-run) object is therefore kept in an overlay until the informer
reports that name, or for ``overlay_seconds``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.api.decode import decode, split
from tierra.api.hypernode import (
    GROUPS,
    MANAGED_BY,
    TIERRA_GROUP,
    HyperNode,
    decode_hypernode,
    qualified,
)
from tierra.api.kueue import PREFIX as KUEUE_PREFIX
from tierra.api.kueue import cluster_problems
from tierra.api.node import Node
from tierra.api.pod import decode_pod
from tierra.api.podgroup import PodGroup, decode_podgroup
from tierra.api.workload import WORKLOAD_GROUP, decode_workload_podgroup, resolve_topology_keys
from tierra.errors import Problem, Severity
from tierra.kube.webhook.devices import DeviceRules
from tierra.scheduler.explain.refusals import podgroup_refusals
from tierra.scheduler.state.store import ClusterStore
from tierra.topology.index import TopologyIndex
from tierra.topology.mirrors import is_mirror

OVERLAY_SECONDS = 30.0
_Key = tuple[str, str, str]  # (object, field path, message): one problem, wherever found


@dataclass(frozen=True, slots=True)
class Verdict:
    """Allowed or not; ``problems`` are the reasons (errors) and ``warnings`` the rest."""

    allowed: bool
    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return "\n".join(str(p) for p in self.problems)


def _key(p: Problem) -> _Key:
    return (p.obj, p.path, p.message)


@dataclass(slots=True)
class _Forest:
    """One group's HyperNodes as the informer sees them, plus admitted ones not yet seen."""

    seen: dict[str, HyperNode] = field(default_factory=dict)
    admitted: dict[str, tuple[HyperNode, float]] = field(default_factory=dict)
    generation: int = 0
    _problems: tuple[int, frozenset[_Key]] | None = None

    def view(self) -> dict[str, HyperNode]:
        out = dict(self.seen)
        out.update({n: h for n, (h, _) in self.admitted.items()})
        return out

    def expire(self, now: float) -> None:
        gone = [n for n, (_, until) in self.admitted.items() if until <= now]
        for n in gone:
            del self.admitted[n]
        if gone:
            self.generation += 1

    def problems(self) -> frozenset[_Key]:
        """The error problems the current view already has (cached per generation)."""
        if self._problems is None or self._problems[0] != self.generation:
            index = TopologyIndex.build((), list(self.view().values()))
            errors, _ = split(index.problems)
            self._problems = (self.generation, frozenset(map(_key, errors)))
        return self._problems[1]


class Judge:
    """Decides admission requests against the HyperNodes the informers have delivered.

    Not thread-safe: use it from one event loop (the webhook's).
    """

    def __init__(
        self,
        *,
        podgroup_groups: Sequence[str] = GROUPS,
        overlay_seconds: float = OVERLAY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._forests: dict[str, _Forest] = {g: _Forest() for g in GROUPS}
        self._podgroup_groups = tuple(podgroup_groups)
        self._overlay_seconds = overlay_seconds
        self._clock = clock
        # The nodes, and the HyperNodes a PodGroup's topology is resolved against (which
        # generations of the forests, and which label domains, it was last given).
        self._cache = ClusterStore()
        self._cache_key: tuple[tuple[int, ...], tuple[str, ...]] | None = None
        self._merged: tuple[tuple[int, ...], list[HyperNode]] | None = None
        self._listing: contextlib.ExitStack | None = None
        # PodGroups with a topology of their own, by ns/name (the field it is in): a pod of
        # theirs carrying Kueue's topology annotations is warned which wins
        self.topology_podgroups: dict[str, str] = {}
        self.devices = DeviceRules(overlay_seconds=overlay_seconds, clock=clock)

    # -- the informers' side --------------------------------------------------------------

    def upsert(self, hn: HyperNode) -> None:
        forest = self._forests[hn.group]
        forest.seen[hn.name] = hn
        forest.admitted.pop(hn.name, None)
        forest.generation += 1

    def remove(self, group: str, name: str) -> None:
        forest = self._forests[group]
        forest.seen.pop(name, None)
        forest.admitted.pop(name, None)
        forest.generation += 1

    def replace_all(self, group: str, hypernodes: Iterable[HyperNode]) -> None:
        """A relist: the informer's complete view of ``group``."""
        forest = self._forests[group]
        forest.seen = {h.name: h for h in hypernodes}
        forest.admitted.clear()
        forest.generation += 1

    def count(self, group: str) -> int:
        return len(self._forests[group].view())

    def upsert_podgroup(self, pg: PodGroup) -> None:
        if pg.network_topology is not None:
            self.topology_podgroups[pg.key] = pg.api.topology
        else:
            self.topology_podgroups.pop(pg.key, None)

    def remove_podgroup(self, key: str) -> None:
        self.topology_podgroups.pop(key, None)

    def upsert_node(self, node: Node) -> None:
        self._cache.upsert_node(node)

    def remove_node(self, name: str) -> None:
        self._cache.remove_node(name)

    def listing_nodes(self, start: bool) -> None:
        """Bracket a LIST of Nodes (the informer's ``on_list``): one index rebuild for it."""
        if start and self._listing is None:
            self._listing = contextlib.ExitStack()
            self._listing.enter_context(self._cache.batch())
        elif not start and self._listing is not None:
            self._listing.close()
            self._listing = None

    # -- decisions ------------------------------------------------------------------------

    def review_hypernode(self, raw: Mapping[str, Any], *, dry_run: bool = False) -> Verdict:
        """Admit ``raw`` (a create or an update) unless it adds a problem to its forest."""
        hn, decoded = decode(decode_hypernode, raw)
        errors, warnings = split(decoded)
        forest = self._forests.get(hn.group, self._forests[TIERRA_GROUP])
        forest.expire(self._clock())
        before = forest.problems()
        view = forest.view()
        view[hn.name] = hn
        index = TopologyIndex.build((), list(view.values()), list(decoded))
        graph_errors, graph_warnings = split(index.problems)
        errors += [p for p in graph_errors if _key(p) not in before]
        warnings += [p for p in graph_warnings if p.obj == hn.ref]
        warnings += self._namesake(hn)
        if errors:
            return Verdict(False, tuple(errors), tuple(map(str, warnings)))
        if not dry_run:
            forest.admitted[hn.name] = (hn, self._clock() + self._overlay_seconds)
            forest.generation += 1
        return Verdict(True, (), tuple(map(str, warnings)))

    def _namesake(self, hn: HyperNode) -> list[Problem]:
        """A warning when the other group holds ``hn``'s name and neither is the other's
        mirror: two HyperNodes, which tierra tells apart as ``group/name``."""
        for group, forest in self._forests.items():
            other = forest.view().get(hn.name) if group != hn.group else None
            if other is None or is_mirror(hn, other) or is_mirror(other, hn):
                continue
            return [
                Problem(
                    f"{group} also holds a HyperNode named {hn.name!r}: the two groups are "
                    f"two name spaces, so these are two HyperNodes, which tierra calls "
                    f"{qualified(hn.group, hn.name)} and {qualified(group, hn.name)} (one is "
                    f"taken for a copy of the other only when both carry the same "
                    f"{MANAGED_BY} label, as the controller writes them)",
                    None,
                    hn.ref,
                    "metadata.name",
                    Severity.WARNING,
                    hn.group,
                )
            ]
        return []

    def review_podgroup(self, raw: Mapping[str, Any], *, group: str = "") -> Verdict:
        """Admit ``raw`` (a PodGroup of ``group``: Volcano's unless it is ``WORKLOAD_GROUP``)
        unless it is malformed or its topology cannot be honoured; warn when it could
        never fit (see the module docstring)."""
        decoder = decode_workload_podgroup if group == WORKLOAD_GROUP else decode_podgroup
        pg, decoded = decode(decoder, raw)
        errors, warnings = split(decoded)
        judged, more = split(podgroup_refusals(self._cache, self._with_topology(pg)))
        errors += judged
        warnings += more
        shared, unknown = split(self.devices.podgroup_problems(pg))
        errors += shared
        warnings += unknown
        return Verdict(not errors, tuple(errors), tuple(map(str, warnings)))

    def review_devices(
        self, kind: str, raw: Mapping[str, Any], *, dry_run: bool = False
    ) -> Verdict:
        """A DeviceClass, ResourceClaim or template (``devices.py``)."""
        errors, warnings = split(self.devices.review(kind, raw, dry_run=dry_run))
        return Verdict(not errors, tuple(errors), tuple(map(str, warnings)))

    def review_pod(self, raw: Mapping[str, Any]) -> Verdict:
        """Refuse a pod whose Kueue topology annotations are malformed or name a level no
        node carries, or whose Kueue pod group keys are malformed (``tierra validate``'s
        words); warn when its gang also has Volcano's topology. Nothing else of a pod is
        judged here."""
        decoded: list[Problem] = []
        pod = decode_pod(raw, None, decoded)
        ours = [
            p
            for p in decoded
            if p.path.startswith(
                (f"metadata.annotations[{KUEUE_PREFIX}", f"metadata.labels[{KUEUE_PREFIX}")
            )
        ]
        errors, warnings = split(ours)
        group = f"{pod.namespace}/{pod.group_name}" if pod.group_name else None
        podgroup = (group, self.topology_podgroups.get(group)) if group is not None else None
        carried: set[str] = set()
        if any(k.startswith(KUEUE_PREFIX) for k in pod.meta.annotations):
            carried = {k for n in self._cache.nodes for k in n.labels}
        for path, message, error in cluster_problems(pod.meta.annotations, carried, podgroup):
            problem = Problem(message, None, f"Pod/{pod.key}", path)
            (errors if error else warnings).append(problem)
        return Verdict(not errors, tuple(errors), tuple(map(str, warnings)))

    def _with_topology(self, pg: PodGroup) -> PodGroup:
        """``pg`` with its label key (if any) made a tier, and the cache holding the
        HyperNodes of the configured groups (each group its own name space; where the
        controller mirrors tierra's into Volcano's, the index keeps tierra's copy, as the
        scheduler does) and the label domains the key needs."""
        now = self._clock()
        forests = [self._forests[g] for g in self._podgroup_groups]
        for f in forests:
            f.expire(now)
        generations = tuple(f.generation for f in forests)
        if self._merged is None or self._merged[0] != generations:
            every = [h for f in forests for h in f.view().values()]
            self._merged = (generations, every)
        real = self._merged[1]
        (resolved,), extra = resolve_topology_keys([pg], self._cache.nodes, real)
        key = (generations, tuple(h.name for h in extra))
        if key != self._cache_key:
            self._cache.set_hypernodes([*real, *extra])
            self._cache_key = key
        return resolved
