"""What ``tierra validate`` (and the webhook) can say about DRA objects before any node.

A selector that does not compile and a request naming a DeviceClass that does not exist
are located errors (object and field path): the scheduler could never allocate such a
claim, on any node. A pod naming a claim the snapshot does not hold is a warning (a
dump of one namespace may leave it out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tierra.api.resource import ClaimSpec, DeviceClass
from tierra.api.snapshot import Snapshot
from tierra.errors import Origin, Problem, Severity
from tierra.scheduler.devices.cel import compile_problem


def _selectors(
    selectors: Iterable[str | None], path: str, obj: str, origin: Origin | None
) -> list[Problem]:
    out = []
    for i, expression in enumerate(selectors):
        if expression is None:
            continue  # no CEL: the decoder's problem, or a selector type of the future
        problem = compile_problem(expression)
        if problem is not None:
            message = f"CEL selector does not compile: {problem}"
            out.append(Problem(message, origin, obj, f"{path}[{i}].cel.expression"))
    return out


def class_problems(klass: DeviceClass, origin: Origin | None) -> list[Problem]:
    """A DeviceClass's own selectors that do not compile, located."""
    return _selectors(klass.selectors, "spec.selectors", f"DeviceClass/{klass.meta.name}", origin)


def claim_spec_problems(
    spec: ClaimSpec,
    classes: Mapping[str, DeviceClass],
    obj: str,
    origin: Origin | None,
    prefix: str = "spec",
) -> list[Problem]:
    out = []
    for ri, request in enumerate(spec.requests):
        path = f"{prefix}.devices.requests[{ri}]"
        alternatives = [(request.exactly, f"{path}.exactly")] if request.exactly else []
        alternatives += [
            (sub, f"{path}.firstAvailable[{j}]") for j, sub in enumerate(request.first_available)
        ]
        for alt, where in alternatives:
            if alt is None:
                continue
            if alt.device_class_name and alt.device_class_name not in classes:
                message = f"DeviceClass {alt.device_class_name} does not exist"
                out.append(Problem(message, origin, obj, f"{where}.deviceClassName"))
            out += _selectors(alt.selectors, f"{where}.selectors", obj, origin)
    return out


def dra_problems(snapshot: Snapshot) -> list[Problem]:
    classes = {c.meta.name: c for c in snapshot.device_classes}
    out: list[Problem] = []
    for c in snapshot.device_classes:
        out += class_problems(c, c.origin)
    for claim in snapshot.resource_claims:
        out += claim_spec_problems(claim.spec, classes, claim.ref, claim.origin)
    for t in snapshot.claim_templates:
        obj = f"ResourceClaimTemplate/{t.meta.namespace}/{t.meta.name}"
        out += claim_spec_problems(t.spec, classes, obj, t.origin, prefix="spec.spec")
    claims = {c.key for c in snapshot.resource_claims}
    for pod in snapshot.pods:
        for i, pc in enumerate(pod.resource_claims):
            if pc.claim_name and f"{pod.namespace}/{pc.claim_name}" not in claims:
                out.append(
                    Problem(
                        f"ResourceClaim {pc.claim_name} is not in the snapshot",
                        pod.origin,
                        f"Pod/{pod.key}",
                        f"spec.resourceClaims[{i}]",
                        Severity.WARNING,
                    )
                )
    return out
