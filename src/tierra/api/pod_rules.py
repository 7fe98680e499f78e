"""What in a pod spec decides where it may run beyond resources and node affinity.

Host ports, inter-pod affinity and anti-affinity, topology spread, volumes and the
nominated node, as kube-scheduler's default plugins read them (NodePorts,
InterPodAffinity, PodTopologySpread, VolumeBinding and friends). Most pods carry none of
it: ``decode_rules`` returns ``None`` for them, so a million-pod snapshot pays one empty
slot per pod, not five tuples.

Two rules follow the API server rather than the scheduler, because a snapshot may be
written by hand: with ``hostNetwork`` a container port is its host port (the API
server's defaulting), and ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the
label selector with the pod's own label values (the API server does this on create
since 1.33; merging again adds the same requirement twice, which changes nothing).

``unread`` lists the field paths present in the spec that change where a pod may run and
that tierra reads no further (an inline volume type it cannot place, for instance): the
scheduler keeps such a pod pending with a reason naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.api.fields import Fields
from tierra.api.labels import LabelSelector, Operator, Requirement, decode_label_selector

if TYPE_CHECKING:
    from tierra.api.pod import NodeSelectorTerm

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
PROTOCOLS = ("TCP", "UDP", "SCTP")
WILDCARD_IP = "0.0.0.0"  # an empty hostIP means every address, as NodePorts reads it

# Volume sources that need nothing from the scheduler (they live on any node).
_NODE_LOCAL_VOLUMES = frozenset(
    {
        "emptyDir",
        "configMap",
        "secret",
        "downwardAPI",
        "projected",
        "hostPath",
        "image",
        "gitRepo",
    }
)


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = WILDCARD_IP

    def conflicts(self, other: HostPort) -> bool:
        """NodePorts' rule: same port and protocol, and the addresses overlap."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return self.host_ip == other.host_ip or WILDCARD_IP in (self.host_ip, other.host_ip)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One required (or weighted) pod affinity term.

    ``selector`` None matches no pod (a nil selector); an empty one matches every pod.
    ``namespace_selector`` None with no ``namespaces`` means the pod's own namespace;
    an empty selector means every namespace.
    """

    topology_key: str
    selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    weight: int = 0  # preferred terms only

    def matches_pod(self, labels: Mapping[str, str]) -> bool:
        return self.selector is not None and self.selector.matches(labels)

    @property
    def all_namespaces(self) -> bool:
        return self.namespace_selector is not None and self.namespace_selector.empty


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector | None = None  # None: counts no pod
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    def counts(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with ``labels`` is counted (an empty selector counts none,
        as ``countPodsMatchSelector`` does)."""
        return (
            self.selector is not None and not self.selector.empty and self.selector.matches(labels)
        )


@dataclass(frozen=True, slots=True)
class PreferredNodeTerm:
    """One ``nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution`` entry."""

    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PlacementRules:
    """The parts of a pod spec that tie it to other pods, ports or storage."""

    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()  # required podAffinity
    anti_affinity: tuple[PodAffinityTerm, ...] = ()  # required podAntiAffinity
    preferred_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()  # DoNotSchedule and ScheduleAnyway
    claims: tuple[str, ...] = ()  # PVC names in the pod's namespace (ephemeral: <pod>-<vol>)
    nominated_node: str = ""
    unread: tuple[str, ...] = ()  # field paths tierra does not read that constrain placement
    preferred_nodes: tuple[PreferredNodeTerm, ...] = ()  # preferred node affinity

    @property
    def hard_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == DO_NOT_SCHEDULE)

    @property
    def soft_spread(self) -> tuple[SpreadConstraint, ...]:
        return tuple(c for c in self.spread if c.when_unsatisfiable == SCHEDULE_ANYWAY)


def _merged(
    selector: LabelSelector | None,
    labels: Mapping[str, str],
    match: list[str],
    mismatch: list[str],
) -> LabelSelector | None:
    extra = [Requirement(k, Operator.IN, (labels[k],)) for k in match if k in labels]
    extra += [Requirement(k, Operator.NOT_IN, (labels[k],)) for k in mismatch if k in labels]
    if not extra or selector is None:
        return selector
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))


def _selector(f: Fields, key: str) -> LabelSelector | None:
    return decode_label_selector(f.obj(key)) if f.raw(key) is not None else None


def _term(f: Fields, labels: Mapping[str, str], weight: int = 0) -> PodAffinityTerm:
    return PodAffinityTerm(
        topology_key=f.string("topologyKey", required=True),
        selector=_merged(
            _selector(f, "labelSelector"),
            labels,
            f.str_list("matchLabelKeys"),
            f.str_list("mismatchLabelKeys"),
        ),
        namespaces=tuple(f.str_list("namespaces")),
        namespace_selector=_selector(f, "namespaceSelector"),
        weight=weight,
    )


def _terms(
    f: Fields, labels: Mapping[str, str]
) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
    required = tuple(
        _term(t, labels) for t in f.objects("requiredDuringSchedulingIgnoredDuringExecution")
    )
    preferred = []
    for w in f.objects("preferredDuringSchedulingIgnoredDuringExecution"):
        weight = w.integer("weight", 1, minimum=1, maximum=100)
        preferred.append(_term(w.obj("podAffinityTerm", required=True), labels, weight))
    return required, tuple(preferred)


def _spread(f: Fields, labels: Mapping[str, str]) -> SpreadConstraint:
    policies = (HONOR, IGNORE)
    return SpreadConstraint(
        max_skew=f.integer("maxSkew", 1, required=True, minimum=1),
        topology_key=f.string("topologyKey", required=True),
        when_unsatisfiable=f.enum(
            "whenUnsatisfiable", (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY), DO_NOT_SCHEDULE
        ),
        selector=_merged(_selector(f, "labelSelector"), labels, f.str_list("matchLabelKeys"), []),
        min_domains=f.integer("minDomains", 1, minimum=1),
        node_affinity_policy=f.enum("nodeAffinityPolicy", policies, HONOR),
        node_taints_policy=f.enum("nodeTaintsPolicy", policies, IGNORE),
    )


def _ports(spec: Fields) -> tuple[HostPort, ...]:
    host_network = spec.boolean("hostNetwork")
    out: list[HostPort] = []
    for group in ("initContainers", "containers"):
        for c in spec.objects(group):
            if group == "initContainers" and c.raw("restartPolicy") != "Always":
                continue  # an init container's ports are free again once it ends (NodePorts)
            for p in c.objects("ports"):
                port = p.integer("hostPort", 0, minimum=0, maximum=65535)
                if not port and host_network:
                    port = p.integer("containerPort", 0, minimum=0, maximum=65535)
                protocol = p.enum("protocol", PROTOCOLS, "TCP")
                if port:
                    out.append(HostPort(port, protocol, p.string("hostIP") or WILDCARD_IP))
    return tuple(out)


def _volumes(spec: Fields, pod_name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    claims: list[str] = []
    unread: list[str] = []
    for v in spec.objects("volumes"):
        name = v.string("name", required=True)
        if v.raw("persistentVolumeClaim") is not None:
            claims.append(v.obj("persistentVolumeClaim").string("claimName", required=True))
        elif v.raw("ephemeral") is not None:
            claims.append(f"{pod_name}-{name}")  # the claim the ephemeral controller makes
        else:
            kinds = [k for k in v.data if k != "name" and k not in _NODE_LOCAL_VOLUMES]
            unread.extend(v.at(k) for k in kinds)
    return tuple(claims), tuple(unread)


def decode_rules(
    spec: Fields,
    status: Fields,
    pod_name: str,
    labels: Mapping[str, str],
    *,
    preferred_nodes: tuple[PreferredNodeTerm, ...] = (),
) -> PlacementRules | None:
    """The pod's placement rules, or None when it has none (most pods). ``preferred_nodes``
    are its preferred node affinity terms, decoded beside the required ones (``pod.py``)."""
    nominated = status.string("nominatedNodeName")
    if (
        not nominated
        and not any(
            spec.raw(k) is not None for k in ("affinity", "topologySpreadConstraints", "volumes")
        )
        and not _has_ports(spec)
    ):
        return None
    aff = spec.obj("affinity")
    affinity, preferred = _terms(aff.obj("podAffinity"), labels)
    anti, preferred_anti = _terms(aff.obj("podAntiAffinity"), labels)
    claims, unread = _volumes(spec, pod_name)
    rules = PlacementRules(
        host_ports=_ports(spec),
        affinity=affinity,
        anti_affinity=anti,
        preferred_affinity=preferred,
        preferred_anti_affinity=preferred_anti,
        spread=tuple(_spread(c, labels) for c in spec.objects("topologySpreadConstraints")),
        claims=claims,
        nominated_node=nominated,
        unread=unread,
        preferred_nodes=preferred_nodes,
    )
    return None if rules == PlacementRules() else rules


def _has_ports(spec: Fields) -> bool:
    for group in ("initContainers", "containers"):
        items = spec.raw(group)
        if isinstance(items, list):
            for c in items:
                if isinstance(c, Mapping) and c.get("ports"):
                    return True
    return False
