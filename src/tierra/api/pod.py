"""Pods: what they ask for, where they may go, and which gang they belong to."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.kueue import read_topology
from tierra.api.kueue_pod_group import group_name as kueue_group_name
from tierra.api.kueue_pod_group import in_group as in_kueue_group
from tierra.api.kueue_pod_group import problems as kueue_group_problems
from tierra.api.labels import NODE_SELECTOR_OPERATORS, Requirement, decode_requirement
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.node import Taint, TaintEffect
from tierra.api.pod_rules import PlacementRules, PreferredNodeTerm, decode_rules
from tierra.api.quantity import milli_to_quantity
from tierra.errors import Origin, Problem

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
PODS = "pods"
ONE_POD = 1000  # the ``pods`` resource in milli-units


class Phase(enum.StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: TaintEffect | None = None  # None tolerates every effect
    seconds: int | None = None  # tolerationSeconds: a NoExecute taint tolerated that long

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect is not taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One term of required node affinity: all requirements hold (terms are ORed)."""

    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches nothing (Kubernetes semantics)
        fields = {"metadata.name": node_name}
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches(fields) for r in self.match_fields
        )


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry, with the claim it names once known.

    ``claim_name`` is ``resourceClaimName``, or for a template the name the
    resourceclaim controller recorded in ``status.resourceClaimStatuses`` (empty until
    it has made the claim: the pod must wait for it)."""

    name: str
    claim_name: str = ""
    template_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod:
    """A pod as the scheduler sees it. ``requests`` is the effective request in milli-units.

    The effective request follows Kubernetes: the larger of the app containers' sum and
    each init container's peak (sidecars included), plus pod overhead, plus one ``pods``.

    The raw spec is not kept: a snapshot may hold a million pods, and keeping each
    parsed manifest alive doubled their memory (845 MiB -> 449 MiB for 200,000 pods).
    """

    meta: ObjectMeta
    requests: Mapping[str, int] = field(default_factory=dict)
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    priority_class_name: str = ""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    phase: Phase = Phase.PENDING
    scheduling_group: str = ""  # spec.schedulingGroup.podGroupName (the Workload API)
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates[].name: not to be bound yet
    rules: PlacementRules | None = None  # ports, pod (anti-)affinity, spread, volumes
    resource_claims: tuple[PodClaim, ...] = ()  # DRA: spec.resourceClaims
    origin: Origin | None = field(default=None, compare=False)
    # ``namespace/name``, made once: the scheduler reads it on every path (tables are
    # keyed by it), where a property made a new string at each of ~90,000 reads per
    # 10,000-pod session
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.meta.namespace}/{self.meta.name}")

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    @property
    def group_name(self) -> str:
        """The gang it joins: Volcano's annotation, else the upstream schedulingGroup (both
        name a PodGroup), else Kueue's ``pod-group-name`` (a plain pod group, no PodGroup
        object: ``tierra.scheduler.kueue_pod_groups`` makes the gang)."""
        meta = self.meta
        return (
            meta.annotations.get(GROUP_NAME_ANNOTATION, "")
            or self.scheduling_group
            or kueue_group_name(meta)
        )

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @property
    def gated(self) -> bool:
        """Held by ``schedulingGates``: never bound, and not yet created for its gang."""
        return bool(self.scheduling_gates)

    @property
    def terminated(self) -> bool:
        return self.phase in (Phase.SUCCEEDED, Phase.FAILED)

    @property
    def holds_resources(self) -> bool:
        return self.bound and not self.terminated


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _container_requests(container: Fields) -> dict[str, int]:
    """A container's requests as the API server defaults them: a limit without a request
    is the request too (so a manifest giving ``limits: {nvidia.com/gpu: 8}`` alone asks
    for 8 GPUs, as on a cluster)."""
    resources = container.obj("resources")
    return {**resources.resources("limits"), **resources.resources("requests")}


def effective_requests(spec: Fields) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in spec.objects("containers"):
        _add(total, _container_requests(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.objects("initContainers"):
        req = _container_requests(c)
        if c.string("restartPolicy") == "Always":  # a sidecar runs beside everything after it
            _add(sidecars, req)
            continue
        for k in set(req) | set(sidecars):
            init_peak[k] = max(init_peak.get(k, 0), req.get(k, 0) + sidecars.get(k, 0))
    _add(total, sidecars)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    _add(total, spec.resources("overhead"))
    total[PODS] = total.get(PODS, 0) + ONE_POD
    return total


def _decode_toleration(f: Fields) -> Toleration:
    effect_text = f.string("effect")
    effect = None
    if effect_text:
        try:
            effect = TaintEffect(effect_text)
        except ValueError:
            f.problem(
                "effect", f"must be NoSchedule, PreferNoSchedule or NoExecute; got {effect_text!r}"
            )
    operator = f.enum("operator", ("Equal", "Exists"), "Equal")
    return Toleration(
        key=f.string("key"),
        operator=operator,
        value=f.string("value"),
        effect=effect,
        seconds=f.opt_int("tolerationSeconds"),
    )


_TOLERATIONS: dict[tuple[Any, ...], tuple[Toleration, ...]] = {}
_TOLERATIONS_KEPT = 4096


def _tolerations(spec: Fields) -> tuple[Toleration, ...]:
    """A pod's tolerations; a list seen before without a problem is decoded once.

    Nearly every pod carries the same few (the API server adds the not-ready and
    unreachable ones to each); decoding them was a tenth of a pod's decoding when a
    scheduler lists a cluster. A list with any problem is decoded every time, so its
    problems are reported with each pod that has them.
    """
    raw = spec.raw("tolerations")
    if not raw:
        return tuple(_decode_toleration(t) for t in spec.objects("tolerations"))
    try:
        key = tuple(tuple(sorted(t.items())) for t in raw)
        hash(key)
    except (AttributeError, TypeError):  # not a list of flat mappings: no shortcut
        key = None
    if key is not None and (hit := _TOLERATIONS.get(key)) is not None:
        return hit
    before = len(spec.report.sink)
    out = tuple(_decode_toleration(t) for t in spec.objects("tolerations"))
    if key is not None and len(spec.report.sink) == before:
        if len(_TOLERATIONS) >= _TOLERATIONS_KEPT:
            _TOLERATIONS.clear()
        _TOLERATIONS[key] = out
    return out


def _node_term(t: Fields) -> NodeSelectorTerm:
    exprs = [decode_requirement(e, NODE_SELECTOR_OPERATORS) for e in t.objects("matchExpressions")]
    fields = [decode_requirement(e, NODE_SELECTOR_OPERATORS) for e in t.objects("matchFields")]
    return NodeSelectorTerm(
        tuple(r for r in exprs if r is not None), tuple(r for r in fields if r is not None)
    )


def _decode_terms(spec: Fields) -> tuple[NodeSelectorTerm, ...]:
    if spec.raw("affinity") is None:  # most pods: no need to walk three levels down
        return ()
    required = (
        spec.obj("affinity")
        .obj("nodeAffinity")
        .obj("requiredDuringSchedulingIgnoredDuringExecution")
    )
    return tuple(_node_term(t) for t in required.objects("nodeSelectorTerms"))


def _decode_preferred_terms(spec: Fields) -> tuple[PreferredNodeTerm, ...]:
    """``nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution``: weighted terms
    (NodeAffinity's score; an empty term matches no node, as upstream skips it)."""
    if spec.raw("affinity") is None:
        return ()
    preferred = spec.obj("affinity").obj("nodeAffinity")
    out = []
    for w in preferred.objects("preferredDuringSchedulingIgnoredDuringExecution"):
        weight = w.integer("weight", 1, required=True, minimum=1, maximum=100)
        out.append(PreferredNodeTerm(weight, _node_term(w.obj("preference", required=True))))
    return tuple(out)


def _decode_gates(spec: Fields) -> tuple[str, ...]:
    if spec.raw("schedulingGates") is None:
        return ()
    return tuple(g.string("name", required=True) for g in spec.objects("schedulingGates"))


def _decode_claims(spec: Fields, status: Fields) -> tuple[PodClaim, ...]:
    if spec.raw("resourceClaims") is None:
        return ()
    made = {
        s.string("name"): s.string("resourceClaimName")
        for s in status.objects("resourceClaimStatuses")
    }
    out = []
    for c in spec.objects("resourceClaims"):
        name = c.string("name", required=True)
        template = c.string("resourceClaimTemplateName")
        claim = c.string("resourceClaimName")
        if bool(template) == bool(claim):
            c.problem("", "must set exactly one of resourceClaimName, resourceClaimTemplateName")
        out.append(PodClaim(name, claim or made.get(name, ""), template))
    return tuple(out)


def decode_pod_parts(f: Fields, meta: ObjectMeta, origin: Origin | None) -> Pod:
    for key, message in read_topology(meta.annotations)[1]:  # Kueue's, located
        f.report.add(f"metadata.annotations[{key}]", message)
    if in_kueue_group(meta):  # Kueue's pod group keys, located
        for path, message in kueue_group_problems(meta):
            f.report.add(path, message)
    spec = f.obj("spec", required=True)
    status = f.obj("status")
    phase_text = status.string("phase", "Pending")
    try:
        phase = Phase(phase_text)
    except ValueError:
        status.problem("phase", f"unknown phase {phase_text!r}")
        phase = Phase.UNKNOWN
    return Pod(
        meta=meta,
        requests=effective_requests(spec),
        node_name=spec.string("nodeName"),
        scheduler_name=spec.string("schedulerName", "default-scheduler"),
        priority=spec.integer("priority", 0),
        priority_class_name=spec.string("priorityClassName"),
        node_selector=spec.str_map("nodeSelector"),
        affinity_terms=_decode_terms(spec),
        tolerations=_tolerations(spec),
        phase=phase,
        scheduling_group=spec.obj("schedulingGroup").string("podGroupName"),
        scheduling_gates=_decode_gates(spec),
        rules=decode_rules(
            spec, status, meta.name, meta.labels, preferred_nodes=_decode_preferred_terms(spec)
        ),
        resource_claims=_decode_claims(spec, status),
        origin=origin,
    )


def decode_pod(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> Pod:
    f = Fields(raw, "", Report(origin, object_ref(raw, "Pod", namespaced=True), sink))
    return decode_pod_parts(f, decode_meta(f, namespaced=True), origin)


def encode_pod(pod: Pod) -> dict[str, Any]:
    """A manifest that decodes to the same ``Pod``: what the scheduler reads, in one container."""
    requests = {k: milli_to_quantity(v) for k, v in pod.requests.items() if k != PODS}
    spec: dict[str, Any] = {
        "schedulerName": pod.scheduler_name,
        "containers": [{"name": "main", "resources": {"requests": requests}}],
    }
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.priority:
        spec["priority"] = pod.priority
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in pod.scheduling_gates]
    if pod.scheduling_group:
        spec["schedulingGroup"] = {"podGroupName": pod.scheduling_group}
    if pod.tolerations:
        spec["tolerations"] = [_toleration_dict(t) for t in pod.tolerations]
    status: dict[str, Any] = {"phase": str(pod.phase)}
    if pod.resource_claims:
        spec["resourceClaims"] = [_claim_dict(c) for c in pod.resource_claims]
        made = [c for c in pod.resource_claims if c.template_name and c.claim_name]
        if made:
            status["resourceClaimStatuses"] = [
                {"name": c.name, "resourceClaimName": c.claim_name} for c in made
            ]
    if pod.affinity_terms:
        terms = []
        for t in pod.affinity_terms:
            term: dict[str, Any] = {}
            if t.match_expressions:
                term["matchExpressions"] = [r.to_dict() for r in t.match_expressions]
            if t.match_fields:
                term["matchFields"] = [r.to_dict() for r in t.match_fields]
            terms.append(term)
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod.meta.to_dict(),
        "spec": spec,
        "status": status,
    }


def _claim_dict(c: PodClaim) -> dict[str, str]:
    if c.template_name:
        return {"name": c.name, "resourceClaimTemplateName": c.template_name}
    return {"name": c.name, "resourceClaimName": c.claim_name}


def _toleration_dict(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect is not None:
        out["effect"] = str(t.effect)
    return out
