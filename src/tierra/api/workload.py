"""The upstream Workload API's PodGroup (``scheduling.k8s.io/v1alpha2``) as a tierra gang.

Kubernetes 1.36 serves it behind the ``GenericWorkload`` gate (KEP-4671 gang scheduling,
KEP-5832 the PodGroup API, KEP-5732 topology-aware workload scheduling). A PodGroup says
``schedulingPolicy.gang.minCount`` (or ``basic``: no gang) and, optionally, one
``schedulingConstraints.topology[].key``: a node-label key whose every value is one domain
that must hold all of the group's pods. Pods join it by ``spec.schedulingGroup.podGroupName``
(read by ``tierra.api.pod``), so it becomes the same ``PodGroup`` a Volcano object does.

A label key is not a tier, so decoding keeps it (``TOPOLOGY_KEY_ANNOTATION``) and
``resolve_topology_keys`` turns it into one once the cluster is known:

* if HyperNodes were discovered from that label (tierra's label discovery records the
  label path in ``topology.tierra.dev/source-detail``; its default tier name is the key),
  the constraint is their tier, by name: the gang gets tierra's topology (health, the
  trees above) for free;
* otherwise the nodes' labels are the topology: one tier-1 HyperNode per label value,
  members chosen by ``labelMatch`` (so a node relabelled later moves with its label),
  marked ``SYNTHETIC_ANNOTATION`` and never written to the cluster.

A Volcano and an upstream PodGroup with the same namespace and name are one gang to
tierra (pods name their group by name only); keep the names apart.

``spec.resourceClaims`` (alpha, ``DRAWorkloadResourceClaims``; the API server drops it
without the gate) names claims shared by the whole group: a pod's claim with the same
name, ResourceClaim and template is the group's, reserved for the PodGroup rather than
for the pod (``tierra.scheduler.devices.group_claims``). A template's claim is named in
``status.resourceClaimStatuses`` once the resourceclaim controller has made it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.hypernode import TIERRA_GROUP, HyperNode, Member, MemberSelector, MemberType
from tierra.api.kueue_forest import SYNTHETIC
from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.node import Node
from tierra.api.pod import PodClaim
from tierra.api.podgroup import (
    WORKLOAD_WORDS,
    NetworkTopology,
    PodGroup,
    TopologyMode,
    key_words,
    with_annotations,
)
from tierra.errors import Origin, Problem

WORKLOAD_GROUP = "scheduling.k8s.io"
WORKLOAD_API = "scheduling.k8s.io/v1alpha2"
TOPOLOGY_KEY_ANNOTATION = "topology.tierra.dev/topology-key"
SYNTHETIC_ANNOTATION = SYNTHETIC  # synthetic HyperNodes: made here, never written
SOURCE_DETAIL_ANNOTATION = "topology.tierra.dev/source-detail"  # written by label discovery
SCHEDULED = "PodGroupScheduled"  # the KEP's condition type and reasons
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


def _topology_key(spec: Fields) -> str | None:
    constraints = spec.obj("schedulingConstraints")
    items = constraints.objects("topology")
    if len(items) > 1:
        constraints.problem("topology", f"takes at most one constraint, got {len(items)}")
    if not items:
        return None
    key = items[0].string("key", required=True)
    if key and not _LABEL_KEY.match(key):
        items[0].problem("key", f"{key!r} is not a label key")
        return None
    return key or None


def decode_workload_podgroup(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> PodGroup:
    """One upstream PodGroup; its topology key stays in an annotation until resolved."""
    f = Fields(raw, "", Report(origin, object_ref(raw, "PodGroup", namespaced=True), sink))
    meta = decode_meta(f, namespaced=True)
    spec = f.obj("spec", required=True)
    policy = spec.obj("schedulingPolicy", required=True)
    min_member = 1
    if policy.has("gang") and policy.has("basic"):
        policy.problem("", "takes one of basic or gang, not both")
    elif policy.has("gang"):
        min_member = policy.obj("gang").integer("minCount", 1, minimum=1)
    elif not policy.has("basic"):
        policy.problem("", "needs one of basic or gang")
    key = _topology_key(spec)
    topology = None
    if key is not None:
        meta = replace(meta, annotations={**meta.annotations, TOPOLOGY_KEY_ANNOTATION: key})
        topology = NetworkTopology(
            mode=TopologyMode.HARD, highest_tier_name=key, key=key, words=key_words(key)
        )
    return PodGroup(
        meta=meta,
        min_member=min_member,
        priority_class_name=spec.string("priorityClassName"),
        network_topology=with_annotations(f, meta, topology, "spec.schedulingConstraints"),
        api=WORKLOAD_WORDS,
        resource_claims=_group_claims(spec, f.obj("status")),
        origin=origin,
    )


MAX_GROUP_CLAIMS = 4  # scheduling/v1alpha2 MaxPodGroupResourceClaims


def _group_claims(spec: Fields, status: Fields) -> tuple[PodClaim, ...]:
    """``spec.resourceClaims``, each with the claim it names (a template's once made)."""
    items = spec.objects("resourceClaims")
    if len(items) > MAX_GROUP_CLAIMS:
        spec.problem("resourceClaims", f"takes at most {MAX_GROUP_CLAIMS}, got {len(items)}")
    made = {
        s.string("name"): s.string("resourceClaimName")
        for s in status.objects("resourceClaimStatuses")
    }
    out = []
    for c in items:
        name = c.string("name", required=True)
        template = c.string("resourceClaimTemplateName")
        claim = c.string("resourceClaimName")
        if bool(template) == bool(claim):
            c.problem("", "must set exactly one of resourceClaimName, resourceClaimTemplateName")
        out.append(PodClaim(name, claim or made.get(name, ""), template))
    return tuple(out)


def topology_key(pg: PodGroup) -> str | None:
    """The node-label key an upstream PodGroup's pods must share, if it names one."""
    return pg.meta.annotations.get(TOPOLOGY_KEY_ANNOTATION)


def _discovered_key(hn: HyperNode) -> str:
    """The node-label key label discovery made ``hn`` from (its source detail's last
    level), or "" when it was not made from a label."""
    detail = hn.meta.annotations.get(SOURCE_DETAIL_ANNOTATION, "")
    return detail.rsplit(",", 1)[-1].split("=", 1)[0] if detail else ""


def label_key_of(hn: HyperNode) -> str | None:
    """The node-label key whose values ``hn``'s tier stands for, if any: an upstream
    PodGroup naming that key as its topology gets ``hn``'s tier (advice names it)."""
    synthetic = hn.meta.annotations.get(SYNTHETIC_ANNOTATION)
    if synthetic is not None:
        return synthetic.split("=", 1)[0]
    return _discovered_key(hn) or None


def discovered_tier(key: str, hypernodes: Iterable[HyperNode]) -> str | None:
    """The tier name of HyperNodes discovered from label ``key`` (not synthetic ones)."""
    names: set[str] = set()
    for hn in hypernodes:
        if SYNTHETIC_ANNOTATION in hn.meta.annotations or hn.tier_name is None:
            continue
        if key in (_discovered_key(hn), hn.tier_name):
            names.add(hn.tier_name)
    return min(names, key=lambda n: (n != key, n)) if names else None


def _dns_part(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "x"


def label_domain(key: str, value: str) -> HyperNode:
    """The tier-1 HyperNode of the nodes labelled ``key=value`` (deterministic name)."""
    digest = hashlib.sha256(f"{key}={value}".encode()).hexdigest()[:8]
    name = f"label-{_dns_part(key.rsplit('/', 1)[-1])}-{_dns_part(value)}-{digest}"
    selector = MemberSelector(labels=LabelSelector(match_labels={key: value}))
    return HyperNode(
        meta=ObjectMeta(name=name, annotations={SYNTHETIC_ANNOTATION: f"{key}={value}"}),
        tier=1,
        tier_name=key,
        members=(Member(MemberType.NODE, selector),),
        group=TIERRA_GROUP,
    )


def resolve_topology_keys(
    podgroups: Sequence[PodGroup],
    nodes: Iterable[Node],
    hypernodes: Sequence[HyperNode],
) -> tuple[list[PodGroup], list[HyperNode]]:
    """Every PodGroup with its label key turned into a tier, and the HyperNodes to add
    for keys no discovered HyperNode covers (see the module docstring). Kueue's levels
    are not resolved here: see ``tierra.scheduler.constraints.kueue_resolve``."""
    keys = {k for pg in podgroups if (k := topology_key(pg)) is not None}
    if not keys:
        return list(podgroups), []
    real = [hn for hn in hypernodes if SYNTHETIC_ANNOTATION not in hn.meta.annotations]
    tier_of = {k: discovered_tier(k, real) for k in sorted(keys)}
    uncovered = {k for k, t in tier_of.items() if t is None}
    values: dict[str, set[str]] = {k: set() for k in uncovered}
    if uncovered:
        for node in nodes:
            for k in uncovered:
                v = node.labels.get(k)
                if v is not None:
                    values[k].add(v)
    extra = [label_domain(k, v) for k in sorted(uncovered) for v in sorted(values[k])]
    out = []
    for pg in podgroups:
        k = topology_key(pg)
        tier = tier_of.get(k) if k is not None else None
        nt = pg.network_topology
        if tier is not None and nt is not None and tier != k:
            out.append(replace(pg, network_topology=replace(nt, highest_tier_name=tier)))
        else:
            out.append(pg)
    return out, extra


class TopologyKeys:
    """Upstream PodGroups whose topology key becomes a tier, kept between events.

    ``load_snapshot`` resolves a whole snapshot at once; an adapter that sees objects one
    event at a time (the dashboard's live mode) keeps each keyed PodGroup here (``hold``)
    and, when the groups, node labels or HyperNodes changed, asks ``resolve`` what the
    cluster now makes of them: the PodGroups to use, the synthetic HyperNodes to have,
    and the names of synthetic ones no longer wanted."""

    def __init__(self) -> None:
        self.keyed: dict[str, PodGroup] = {}
        self.synthetic: set[str] = set()

    def hold(self, pg: PodGroup) -> bool:
        """Keep ``pg`` if it names a topology key (True); otherwise forget any earlier
        version of it (False: the PodGroup is used as it is)."""
        if topology_key(pg) is None:
            self.keyed.pop(pg.key, None)
            return False
        self.keyed[pg.key] = pg
        return True

    def drop(self, key: str) -> None:
        self.keyed.pop(key, None)

    def resolve(
        self, nodes: Iterable[Node], hypernodes: Iterable[HyperNode]
    ) -> tuple[list[PodGroup], list[HyperNode], list[str]]:
        real = [h for h in hypernodes if SYNTHETIC_ANNOTATION not in h.meta.annotations]
        podgroups, extra = resolve_topology_keys(list(self.keyed.values()), nodes, real)
        wanted = {h.name for h in extra}
        gone = sorted(self.synthetic - wanted)
        self.synthetic = wanted
        return podgroups, extra, gone
