"""Before the search: each request checked and resolved, as validateDeviceRequest does.

Every refusal upstream returns as an error before it searches (an unknown class, a
selector of unknown type, an unknown allocation mode, ``All`` over an incomplete pool,
more than 32 devices in one claim) is a ``DeviceRefusal`` here, located where the user
wrote it. After a failed search, ``explain_failure`` names the first request short of
devices, or the constraint that could not hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass

from tierra.api.resource import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocationMode,
    Attribute,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    ResourceClaim,
)
from tierra.scheduler.devices.cel import compile_problem
from tierra.scheduler.devices.pools import Candidate, DeviceId, NodeInfo, Pool
from tierra.scheduler.devices.refusal import DeviceRefusal


class Refused(Exception):
    """The claims cannot be allocated on this node, for the reason carried."""

    def __init__(self, refusal: DeviceRefusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


@dataclass(slots=True, eq=False)
class Alternative:
    """A request, or one ``firstAvailable`` subrequest, ready to allocate."""

    claim_index: int
    request: ExactRequest
    parent: str  # the request's name when this is a subrequest
    klass: DeviceClass
    path: str  # spec.devices.requests[i].exactly, or ...firstAvailable[j]
    count: int = 0
    all_devices: list[Candidate] | None = None

    @property
    def name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name

    @property
    def base(self) -> str:
        return self.parent or self.request.name


def lookup_attribute(device: Device, driver: str, name: str) -> Attribute | None:
    """lookupAttribute: the fully qualified name, or the bare id in the driver's domain."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


Selectable = Callable[[Alternative, Candidate, ResourceClaim], bool]


@dataclass(frozen=True, slots=True)
class _Context:
    classes: Mapping[str, DeviceClass]
    selectable: Selectable
    pools: Sequence[Pool]


@dataclass(frozen=True, slots=True)
class Prepared:
    alternatives: list[list[list[Alternative]]]  # claim -> request -> alternatives
    candidates: tuple[Candidate, ...]  # every device of the node's usable pools, in order


def prepare_claims(
    classes: Mapping[str, DeviceClass],
    selectable: Selectable,
    claims: Sequence[ResourceClaim],
    pools: Sequence[Pool],
) -> Prepared:
    """Resolve every request; raise ``Refused`` where upstream would return an error."""
    candidates = tuple(c for p in pools if not p.incomplete and not p.invalid for c in p.candidates)
    out: list[list[list[Alternative]]] = []
    ctx = _Context(classes, selectable, pools)
    for ci, claim in enumerate(claims):
        requests = []
        minimum = 0
        for ri, request in enumerate(claim.spec.requests):
            alts = _alternatives(ctx, claim, ci, ri, request)
            requests.append(alts)
            minimum += min(a.count for a in alts)
        if minimum > ALLOCATION_RESULTS_MAX_SIZE:
            raise Refused(
                DeviceRefusal(
                    claim.ref,
                    "",
                    f"number of requested devices {minimum} exceeds the claim limit of "
                    f"{ALLOCATION_RESULTS_MAX_SIZE}",
                )
            )
        _check_constraints(claim)
        out.append(requests)
    return Prepared(out, candidates)


def _check_constraints(claim: ResourceClaim) -> None:
    for i, c in enumerate(claim.spec.constraints):
        if c.match_attribute:
            continue
        path = f"spec.devices.constraints[{i}]"
        if c.distinct_attribute:
            reason = "distinctAttribute (DRAConsumableCapacity) is not implemented by tierra"
            raise Refused(
                DeviceRefusal(claim.ref, "", reason, claim.ref, path + ".distinctAttribute", True)
            )
        reason = "empty constraint (unsupported constraint type?)"
        raise Refused(DeviceRefusal(claim.ref, "", reason, claim.ref, path, True))


def _alternatives(
    ctx: _Context, claim: ResourceClaim, ci: int, ri: int, request: DeviceRequest
) -> list[Alternative]:
    path = f"spec.devices.requests[{ri}]"
    if request.exactly is not None:
        specs = [(request.exactly, "", f"{path}.exactly")]
    else:
        specs = [
            (sub, request.name, f"{path}.firstAvailable[{j}]")
            for j, sub in enumerate(request.first_available)
        ]
    if not specs:
        reason = "neither exactly nor firstAvailable is set (unsupported request type?)"
        raise Refused(DeviceRefusal(claim.ref, request.name, reason, claim.ref, path, True))
    return [
        _alternative(ctx, claim, ci, spec, parent=parent, path=where)
        for spec, parent, where in specs
    ]


def _refuse(claim: ResourceClaim, req: str, reason: str, path: str = "", obj: str = "") -> Refused:
    return Refused(DeviceRefusal(claim.ref, req, reason, obj or claim.ref, path))


def _alternative(
    ctx: _Context, claim: ResourceClaim, ci: int, req: ExactRequest, *, parent: str, path: str
) -> Alternative:
    name = parent or req.name
    _check_selectors(claim, name, req.selectors, claim.ref, f"{path}.selectors")
    if not req.device_class_name:
        raise _refuse(claim, name, "missing device class name", f"{path}.deviceClassName")
    klass = ctx.classes.get(req.device_class_name)
    if klass is None:
        reason = f"device class {req.device_class_name} does not exist"
        raise _refuse(claim, name, reason, f"{path}.deviceClassName")
    _check_selectors(
        claim, name, klass.selectors, f"DeviceClass/{klass.meta.name}", "spec.selectors"
    )
    if req.capacity:
        reason = "capacity.requests (DRAConsumableCapacity) is not implemented by tierra"
        refusal = DeviceRefusal(claim.ref, name, reason, claim.ref, f"{path}.capacity", True)
        raise Refused(refusal)
    alt = Alternative(ci, req, parent, klass, path)
    if req.allocation_mode == AllocationMode.EXACT_COUNT:
        alt.count = req.count
    elif req.allocation_mode == AllocationMode.ALL:
        alt.all_devices = _all_devices(ctx.selectable, claim, alt, ctx.pools)
        alt.count = len(alt.all_devices)
    else:
        reason = f"unsupported count mode {req.allocation_mode}"
        raise _refuse(claim, name, reason, f"{path}.allocationMode")
    return alt


def _all_devices(
    selectable: Selectable, claim: ResourceClaim, alt: Alternative, pools: Sequence[Pool]
) -> list[Candidate]:
    out: list[Candidate] = []
    for p in pools:
        state = "currently being updated" if p.incomplete else "currently invalid"
        if p.incomplete or p.invalid:
            reason = f"asks for all devices, but resource pool {p.driver}/{p.name} is {state}"
            raise _refuse(claim, alt.base, reason)
        out.extend(c for c in p.candidates if selectable(alt, c, claim))
    return out


def _check_selectors(
    claim: ResourceClaim, request: str, selectors: tuple[str | None, ...], obj: str, path: str
) -> None:
    for i, expression in enumerate(selectors):
        if expression is None:
            reason = f"selector #{i}: CEL expression empty (unsupported selector type?)"
            refusal = DeviceRefusal(claim.ref, request, reason, obj, f"{path}[{i}]", True)
            raise Refused(refusal)
        problem = compile_problem(expression)
        if problem is not None:
            reason = f"CEL compile error: {problem}"
            raise _refuse(claim, request, reason, f"{path}[{i}].cel.expression", obj)


def explain_failure(
    prepared: Prepared,
    claims: Sequence[ResourceClaim],
    selectable: Selectable,
    *,
    in_use: Set[DeviceId],
    node: NodeInfo,
    skipped: Sequence[str],
) -> DeviceRefusal:
    """The first request short of free matching devices, else the constraints at fault."""
    note = f"; not considered: {', '.join(skipped)}" if skipped else ""
    unsupported = sum(1 for c in prepared.candidates if c.device.unsupported)
    if unsupported:
        note += f"; {unsupported} devices left out (fields tierra does not implement)"
    for ci, requests in enumerate(prepared.alternatives):
        claim = claims[ci]
        for alts in requests:
            alt = alts[-1]  # the last alternative is the one tried last: report it
            free = sum(
                1
                for c in prepared.candidates
                if (alt.request.admin_access or c.id not in in_use) and selectable(alt, c, claim)
            )
            need = alt.count if alt.all_devices is None else max(1, alt.count)
            if free < need or (alt.all_devices is not None and free < len(alt.all_devices)):
                what = f"{free} of {need} devices of class {alt.klass.meta.name} free"
                return DeviceRefusal(claim.ref, alt.base, f"{what} on node {node.name}{note}")
        if claim.spec.constraints:
            reason = _constraint_reason(
                prepared, claim, ci, selectable, in_use=in_use, node=node.name
            )
            if reason is not None:
                return DeviceRefusal(claim.ref, "", f"{reason}{note}")
    first = claims[0].ref if claims else ""
    reason = f"the pod's claims cannot all be allocated together on node {node.name}{note}"
    return DeviceRefusal(first, "", reason)


def _constraint_reason(
    prepared: Prepared,
    claim: ResourceClaim,
    ci: int,
    selectable: Selectable,
    *,
    in_use: Set[DeviceId],
    node: str,
) -> str | None:
    """A ``matchAttribute`` no value of which has every request's devices free
    ("matchAttribute resource.kubernetes.io/pcieRoot: no value on node n has 1
    gpu.nvidia.com device and 1 dra.net device free (the most: pci0000:44, 1
    gpu.nvidia.com device)"); None when each constraint alone could hold (together they
    may still not)."""
    requests = prepared.alternatives[ci]
    for c in claim.spec.constraints:
        applies = [alts[0] for alts in requests if not c.requests or alts[0].base in c.requests]
        per_value: dict[object, list[int]] = {}
        for k, alt in enumerate(applies):
            for d in prepared.candidates:
                if d.id in in_use or not selectable(alt, d, claim):
                    continue
                attr = lookup_attribute(d.device, d.id[0], c.match_attribute)
                if attr is not None:
                    per_value.setdefault(attr.value, [0] * len(applies))[k] += 1
        need = [a.count for a in applies]
        if any(all(h >= n for h, n in zip(have, need, strict=True)) for have in per_value.values()):
            continue
        wanted = " and ".join(
            _devices(n, a.klass.meta.name) for n, a in zip(need, applies, strict=True)
        )
        text = f"matchAttribute {c.match_attribute}: no value on node {node} has {wanted} free"
        if per_value:
            value, have = max(
                per_value.items(),
                key=lambda kv: sum(min(h, n) for h, n in zip(kv[1], need, strict=True)),
            )
            held = " and ".join(
                _devices(h, a.klass.meta.name) for h, a in zip(have, applies, strict=True) if h
            )
            text += f" (the most: {value}, {held})"
        return text
    return None


def _devices(n: int, klass: str) -> str:
    return f"{n} {klass} device{'' if n == 1 else 's'}"
