"""What ``tierra validate`` (and the webhook) can say about DRA objects before any node.

A selector that does not compile and a request naming a DeviceClass that does not exist
are located errors (object and field path): the scheduler could never allocate such a
claim, on any node; a PodGroup sharing such a claim is located at the entry naming it.
A pod naming a claim the snapshot does not hold is a warning (a dump of one namespace
may leave it out), and so is a PodGroup naming one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tierra.api.podgroup import PodGroup
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


def podgroup_claim_problems(
    pg: PodGroup,
    classes: Mapping[str, DeviceClass],
    claims: Mapping[str, ClaimSpec],
    templates: Mapping[str, ClaimSpec],
) -> list[Problem]:
    """The claims a PodGroup shares (``spec.resourceClaims``), judged where known: a
    problem of the claim or template it names, located at the entry naming it; one not
    known is a warning (the resourceclaim controller, or the user, may make it later)."""
    out: list[Problem] = []
    ns, obj = pg.meta.namespace, f"PodGroup/{pg.key}"
    for i, c in enumerate(pg.resource_claims):
        if c.template_name:
            kind, name, prefix, key = (
                "ResourceClaimTemplate",
                c.template_name,
                "spec.spec",
                "resourceClaimTemplateName",
            )
            spec = templates.get(f"{ns}/{name}")
        else:
            kind, name, prefix, key = "ResourceClaim", c.claim_name, "spec", "resourceClaimName"
            spec = claims.get(f"{ns}/{name}")
        where = f"spec.resourceClaims[{i}].{key}"
        if spec is None:
            message = f"{kind} {ns}/{name} does not exist yet"
            out.append(Problem(message, pg.origin, obj, where, Severity.WARNING))
            continue
        for p in claim_spec_problems(spec, classes, f"{kind}/{ns}/{name}", None, prefix):
            out.append(Problem(f"{p.obj} {p.path}: {p.message}", pg.origin, obj, where, p.severity))
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
    specs = {c.key: c.spec for c in snapshot.resource_claims}
    templates = {f"{t.meta.namespace}/{t.meta.name}": t.spec for t in snapshot.claim_templates}
    for pg in snapshot.podgroups:
        if pg.resource_claims:
            out += podgroup_claim_problems(pg, classes, specs, templates)
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
