"""Dynamic Resource Allocation (``resource.k8s.io/v1``): the four kinds a scheduler reads.

DeviceClass, ResourceClaim, ResourceClaimTemplate and ResourceSlice, with the fields of
``k8s.io/api/resource/v1`` at v0.36.3 that allocation depends on. Fields the allocator
does not implement (counters, binding conditions, consumable capacity, per-device node
selection, distinct attributes) are still read, so the allocator can refuse a request
that needs them by name instead of allocating without them.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.labels import NODE_SELECTOR_OPERATORS, decode_requirement
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.pod import NodeSelectorTerm
from tierra.api.quantity import QuantityError, parse_quantity
from tierra.errors import Origin, Problem

GROUP = "resource.k8s.io"
API_VERSION = "resource.k8s.io/v1"
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"
"""The finalizer kube-scheduler puts on a claim it allocates (pkg/apis/resource)."""
ALLOCATION_RESULTS_MAX_SIZE = 32
"""resourceapi.AllocationResultsMaxSize: the most devices one claim may be given."""


class AllocationMode(enum.StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


class TaintEffect(enum.StrEnum):
    NONE = "None"
    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


ATTRIBUTE_KINDS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


@dataclass(frozen=True, slots=True)
class Attribute:
    """One device attribute: exactly one typed value (``kind`` is its JSON field name)."""

    kind: str
    value: int | bool | str | tuple[int | bool | str, ...]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # unknown effects are kept: they count as None


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty tolerates every effect

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim.ToleratesTaint: an empty key with Exists tolerates everything."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True, kw_only=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute] = field(default_factory=dict)
    capacity: Mapping[str, Fraction] = field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()
    unsupported: tuple[str, ...] = ()  # fields set that the allocator does not implement


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    devices: tuple[Device, ...] = ()
    unsupported: tuple[str, ...] = ()
    origin: Origin | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeviceConfiguration:
    """An opaque driver configuration, carried unread into the allocation result."""

    driver: str
    parameters: str  # canonical JSON, so the dataclass stays hashable
    requests: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.requests:
            out["requests"] = list(self.requests)
        out["opaque"] = {"driver": self.driver, "parameters": json.loads(self.parameters)}
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[str | None, ...] = ()  # CEL expressions; None: a selector of unknown type
    config: tuple[DeviceConfiguration, ...] = ()
    extended_resource_name: str = ""
    origin: Origin | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExactRequest:
    """An ``exactly`` request or one ``firstAvailable`` alternative (same fields)."""

    name: str
    device_class_name: str
    selectors: tuple[str | None, ...] = ()
    allocation_mode: str = AllocationMode.EXACT_COUNT  # unknown modes kept, refused later
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: Mapping[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[ExactRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceConfiguration, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceResult:
    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocatedConfig:
    source: str  # FromClass | FromClaim
    config: DeviceConfiguration


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    results: tuple[DeviceResult, ...] = ()
    config: tuple[AllocatedConfig, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    timestamp: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerRef:
    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceClaim:
    meta: ObjectMeta
    spec: ClaimSpec
    allocation: Allocation | None = None
    reserved_for: tuple[ConsumerRef, ...] = ()
    origin: Origin | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def ref(self) -> str:
        return f"ResourceClaim/{self.key}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceClaimTemplate:
    meta: ObjectMeta
    claim_meta: Mapping[str, Any] = field(default_factory=dict)  # spec.metadata, as given
    spec: ClaimSpec
    origin: Origin | None = field(default=None, compare=False)


# --- decoding -------------------------------------------------------------------------


def _attribute(f: Fields, key: str) -> Attribute | None:
    a = f.obj(key)
    present = [k for k in ATTRIBUTE_KINDS if a.has(k)]
    if len(present) != 1:
        a.problem("", f"must have exactly one of {', '.join(ATTRIBUTE_KINDS)}; got {present}")
        return None
    kind = present[0]
    raw = a.raw(kind)
    if kind in ("int", "ints"):
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in _items(raw))
    elif kind in ("bool", "bools"):
        ok = all(isinstance(v, bool) for v in _items(raw))
    else:
        ok = all(isinstance(v, str) for v in _items(raw))
    if not ok or (kind.endswith("s") and not isinstance(raw, list)):
        a.problem(kind, f"expected {'a list of ' if kind.endswith('s') else ''}{kind} values")
        return None
    return Attribute(kind, tuple(raw) if isinstance(raw, list) else raw)


def _items(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else [raw]


def _quantities(f: Fields, key: str, leaf: str | None) -> dict[str, Fraction]:
    """``{name: {value: 80Gi}}`` (device capacity, ``leaf="value"``) or ``{name: 80Gi}``."""
    out: dict[str, Fraction] = {}
    section = f.obj(key)
    for name in sorted(section.data):
        raw = section.obj(name).raw(leaf) if leaf else section.raw(name)
        try:
            out[name] = parse_quantity(raw)
        except (QuantityError, TypeError):
            section.problem(f"{name}.{leaf}" if leaf else name, f"not a quantity: {raw!r}")
    return out


def _node_selector(f: Fields, key: str) -> tuple[NodeSelectorTerm, ...] | None:
    if not f.has(key):
        return None
    terms = []
    for t in f.obj(key).objects("nodeSelectorTerms"):
        exprs = [
            decode_requirement(e, NODE_SELECTOR_OPERATORS) for e in t.objects("matchExpressions")
        ]
        fields = [decode_requirement(e, NODE_SELECTOR_OPERATORS) for e in t.objects("matchFields")]
        terms.append(
            NodeSelectorTerm(
                tuple(r for r in exprs if r is not None), tuple(r for r in fields if r is not None)
            )
        )
    return tuple(terms)


_UNSUPPORTED_DEVICE_FIELDS = (
    "consumesCounters",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "bindingConditions",
    "bindingFailureConditions",
    "allowMultipleAllocations",
    "bindsToNode",
)


def _device(f: Fields) -> Device:
    attributes = {}
    attrs = f.obj("attributes")
    for name in sorted(attrs.data):
        value = _attribute(attrs, name)
        if value is not None:
            attributes[name] = value
    taints = tuple(
        DeviceTaint(t.string("key", required=True), t.string("value"), t.string("effect"))
        for t in f.objects("taints")
    )
    return Device(
        name=f.string("name", required=True),
        attributes=attributes,
        capacity=_quantities(f, "capacity", "value"),
        taints=taints,
        unsupported=tuple(k for k in _UNSUPPORTED_DEVICE_FIELDS if f.has(k)),
    )


def decode_resource_slice(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> ResourceSlice:
    f = Fields(raw, "", Report(origin, object_ref(raw, "ResourceSlice"), sink))
    meta = decode_meta(f, namespaced=False)
    spec = f.obj("spec", required=True)
    pool = spec.obj("pool", required=True)
    unsupported = tuple(k for k in ("sharedCounters", "perDeviceNodeSelection") if spec.has(k))
    return ResourceSlice(
        meta=meta,
        driver=spec.string("driver", required=True),
        pool=pool.string("name", required=True),
        generation=pool.integer("generation", maximum=None),
        slice_count=pool.integer("resourceSliceCount", 1, minimum=1, maximum=None),
        node_name=spec.string("nodeName"),
        node_selector=_node_selector(spec, "nodeSelector"),
        all_nodes=spec.boolean("allNodes"),
        devices=tuple(_device(d) for d in spec.objects("devices")),
        unsupported=unsupported,
        origin=origin,
    )


def _selectors(f: Fields) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for s in f.objects("selectors"):
        out.append(s.obj("cel").string("expression", required=True) if s.has("cel") else None)
    return tuple(out)


def _configs(f: Fields, key: str) -> tuple[DeviceConfiguration, ...]:
    out = []
    for c in f.objects(key):
        opaque = c.obj("opaque", required=True)
        params = opaque.raw("parameters")
        out.append(
            DeviceConfiguration(
                driver=opaque.string("driver", required=True),
                parameters=json.dumps(params, sort_keys=True, separators=(",", ":")),
                requests=tuple(c.str_list("requests")),
            )
        )
    return tuple(out)


def decode_device_class(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> DeviceClass:
    f = Fields(raw, "", Report(origin, object_ref(raw, "DeviceClass"), sink))
    meta = decode_meta(f, namespaced=False)
    spec = f.obj("spec")
    return DeviceClass(
        meta=meta,
        selectors=_selectors(spec),
        config=_configs(spec, "config"),
        extended_resource_name=spec.string("extendedResourceName"),
        origin=origin,
    )


def _tolerations(f: Fields) -> tuple[DeviceToleration, ...]:
    return tuple(
        DeviceToleration(
            key=t.string("key"),
            operator=t.enum("operator", ("Equal", "Exists"), "Equal"),
            value=t.string("value"),
            effect=t.string("effect"),
        )
        for t in f.objects("tolerations")
    )


def _exact(f: Fields, name: str) -> ExactRequest:
    mode = f.string("allocationMode", AllocationMode.EXACT_COUNT)
    return ExactRequest(
        name=name,
        device_class_name=f.string("deviceClassName", required=True),
        selectors=_selectors(f),
        allocation_mode=mode,
        count=f.integer("count", 1, minimum=1, maximum=None),
        admin_access=f.boolean("adminAccess"),
        tolerations=_tolerations(f),
        capacity=_quantities(f.obj("capacity"), "requests", None),
    )


def _request(f: Fields) -> DeviceRequest:
    name = f.string("name", required=True)
    subs = tuple(_exact(s, s.string("name", required=True)) for s in f.objects("firstAvailable"))
    exactly = _exact(f.obj("exactly"), name) if f.has("exactly") else None
    if (exactly is None) == (not subs):
        f.problem("", "must set exactly one of exactly or firstAvailable")
    return DeviceRequest(name=name, exactly=exactly, first_available=subs)


def decode_claim_spec(spec: Fields) -> ClaimSpec:
    devices = spec.obj("devices")
    constraints = tuple(
        DeviceConstraint(
            requests=tuple(c.str_list("requests")),
            match_attribute=c.string("matchAttribute"),
            distinct_attribute=c.string("distinctAttribute"),
        )
        for c in devices.objects("constraints")
    )
    return ClaimSpec(
        requests=tuple(_request(r) for r in devices.objects("requests")),
        constraints=constraints,
        config=_configs(devices, "config"),
    )


def _allocation(f: Fields) -> Allocation | None:
    if not f.has("allocation"):
        return None
    a = f.obj("allocation")
    results = tuple(
        DeviceResult(
            request=r.string("request", required=True),
            driver=r.string("driver", required=True),
            pool=r.string("pool", required=True),
            device=r.string("device", required=True),
            admin_access=r.boolean("adminAccess"),
            tolerations=_tolerations(r),
        )
        for r in a.obj("devices").objects("results")
    )
    configs = tuple(
        AllocatedConfig(source=c.string("source"), config=cfg)
        for c, cfg in zip(
            a.obj("devices").objects("config"), _configs(a.obj("devices"), "config"), strict=False
        )
    )
    return Allocation(
        results=results,
        config=configs,
        node_selector=_node_selector(a, "nodeSelector"),
        timestamp=a.string("allocationTimestamp"),
    )


def decode_resource_claim(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> ResourceClaim:
    f = Fields(raw, "", Report(origin, object_ref(raw, "ResourceClaim", namespaced=True), sink))
    meta = decode_meta(f, namespaced=True)
    status = f.obj("status")
    reserved = tuple(
        ConsumerRef(
            resource=r.string("resource", required=True),
            name=r.string("name", required=True),
            uid=r.string("uid"),
            api_group=r.string("apiGroup"),
        )
        for r in status.objects("reservedFor")
    )
    return ResourceClaim(
        meta=meta,
        spec=decode_claim_spec(f.obj("spec", required=True)),
        allocation=_allocation(status),
        reserved_for=reserved,
        origin=origin,
    )


def decode_resource_claim_template(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> ResourceClaimTemplate:
    ref = object_ref(raw, "ResourceClaimTemplate", namespaced=True)
    f = Fields(raw, "", Report(origin, ref, sink))
    meta = decode_meta(f, namespaced=True)
    spec = f.obj("spec", required=True)
    claim_meta = spec.raw("metadata")
    return ResourceClaimTemplate(
        meta=meta,
        claim_meta=dict(claim_meta) if isinstance(claim_meta, Mapping) else {},
        spec=decode_claim_spec(spec.obj("spec", required=True)),
        origin=origin,
    )


# --- encoding (what the scheduler writes) --------------------------------------------


def node_selector_dict(terms: tuple[NodeSelectorTerm, ...]) -> dict[str, Any]:
    out = []
    for t in terms:
        term: dict[str, Any] = {}
        if t.match_expressions:
            term["matchExpressions"] = [r.to_dict() for r in t.match_expressions]
        if t.match_fields:
            term["matchFields"] = [r.to_dict() for r in t.match_fields]
        out.append(term)
    return {"nodeSelectorTerms": out}


def _toleration_dict(t: DeviceToleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)):
        if v:
            out[k] = v
    return out


def allocation_dict(a: Allocation) -> dict[str, Any]:
    """``status.allocation`` as the API server takes it."""
    results = []
    for r in a.results:
        item: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access:
            item["adminAccess"] = True
        if r.tolerations:
            item["tolerations"] = [_toleration_dict(t) for t in r.tolerations]
        results.append(item)
    devices: dict[str, Any] = {"results": results}
    if a.config:
        devices["config"] = [{"source": c.source, **c.config.to_dict()} for c in a.config]
    out: dict[str, Any] = {"devices": devices}
    if a.node_selector is not None:
        out["nodeSelector"] = node_selector_dict(a.node_selector)
    if a.timestamp:
        out["allocationTimestamp"] = a.timestamp
    return out
