"""The webhook's DRA rules: claims tierra could never allocate are refused where written.

``tierra validate`` locates two mistakes in a claim (``scheduler.devices.checks``): a
request naming a DeviceClass that does not exist, and a CEL selector that does not
compile in Kubernetes' DRA environment as tierra evaluates it. Here the same check, in
the same words, judges what is being written:

* **ResourceClaim** and **ResourceClaimTemplate** (created; their specs are immutable):
  refused with every located problem (``ResourceClaim/ns/c
  spec.devices.requests[0].exactly.deviceClassName: DeviceClass gpu.example.com does not
  exist``). The scheduler would otherwise keep every pod of it pending for good.
* **DeviceClass**: refused when one of its own selectors does not compile; an admitted
  class is kept (``overlay_seconds``) until the informer reports it, so a claim written
  right after its class (``kubectl apply`` of one file) is judged against it.
* **PodGroup** with ``spec.resourceClaims`` (``DRAWorkloadResourceClaims``): each claim
  or template it names, when the informers hold it, is judged as above; a problem there
  refuses the PodGroup at ``spec.resourceClaims[i]`` (its pods could never start). One not
  written yet is a warning: the resourceclaim controller, or the user, may make it later.

The informers keep DeviceClasses, and the specs of ResourceClaims and templates, in
memory: a decision does no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.decode import Meta, decode
from tierra.api.podgroup import PodGroup
from tierra.api.resource import (
    ClaimSpec,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
)
from tierra.errors import Problem, Severity
from tierra.kube.client import Kube
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.resources import DEVICE_CLASSES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS
from tierra.scheduler.devices.checks import (
    claim_spec_problems,
    class_problems,
    podgroup_claim_problems,
)

GROUP = "resource.k8s.io"
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")
OVERLAY_SECONDS = 30.0


@dataclass(slots=True)
class DeviceRules:
    """DeviceClasses and claim specs as the informers deliver them, and the rules."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    admitted: dict[str, tuple[DeviceClass, float]] = field(default_factory=dict)
    claims: dict[str, ClaimSpec] = field(default_factory=dict)  # ns/name
    templates: dict[str, ClaimSpec] = field(default_factory=dict)  # ns/name
    overlay_seconds: float = OVERLAY_SECONDS
    clock: Callable[[], float] = time.monotonic

    # -- the informers' side ------------------------------------------------------------

    def on_class(self, e: Event[DeviceClass]) -> None:
        self.admitted.pop(e.key, None)
        if e.type is EventType.DELETED:
            self.classes.pop(e.key, None)
        elif e.obj is not None:
            self.classes[e.key] = e.obj

    def on_claim(self, e: Event[ResourceClaim]) -> None:
        if e.type is EventType.DELETED:
            self.claims.pop(e.key, None)
        elif e.obj is not None:
            self.claims[e.key] = e.obj.spec

    def on_template(self, e: Event[ResourceClaimTemplate]) -> None:
        if e.type is EventType.DELETED:
            self.templates.pop(e.key, None)
        elif e.obj is not None:
            self.templates[e.key] = e.obj.spec

    def known_classes(self) -> dict[str, DeviceClass]:
        now = self.clock()
        for name in [n for n, (_, until) in self.admitted.items() if until <= now]:
            del self.admitted[name]
        return {**self.classes, **{n: c for n, (c, _) in self.admitted.items()}}

    # -- decisions ----------------------------------------------------------------------

    def review(self, kind: str, raw: Mapping[str, Any], *, dry_run: bool = False) -> list[Problem]:
        """Every problem of a DeviceClass, ResourceClaim or template being written."""
        if kind == "DeviceClass":
            klass, decoded = decode(decode_device_class, raw)
            out = [*decoded, *class_problems(klass, None)]
            if not dry_run and not any(p.severity is Severity.ERROR for p in out):
                self.admitted[klass.meta.name] = (klass, self.clock() + self.overlay_seconds)
            return out
        if kind == "ResourceClaim":
            claim, decoded = decode(decode_resource_claim, raw)
            return [
                *decoded,
                *claim_spec_problems(claim.spec, self.known_classes(), claim.ref, None),
            ]
        template, decoded = decode(decode_resource_claim_template, raw)
        ref = f"ResourceClaimTemplate/{template.meta.namespace}/{template.meta.name}"
        classes = self.known_classes()
        return [*decoded, *claim_spec_problems(template.spec, classes, ref, None, "spec.spec")]

    def podgroup_problems(self, pg: PodGroup) -> list[Problem]:
        """The claims a PodGroup shares, judged where the informers hold them."""
        return podgroup_claim_problems(pg, self.known_classes(), self.claims, self.templates)


def informers(kube: Kube, rules: DeviceRules) -> list[Informer[Any]]:
    """DeviceClasses, ResourceClaims and templates into ``rules`` (where DRA is served)."""

    def lean(decoder: Any) -> Callable[[Mapping[str, Any]], Any]:
        return lambda raw: decode(decoder, raw, meta=Meta.LEAN)[0]

    return [
        Informer(kube, DEVICE_CLASSES, lean(decode_device_class), rules.on_class),
        Informer(kube, RESOURCE_CLAIMS, lean(decode_resource_claim), rules.on_claim),
        Informer(
            kube, RESOURCE_CLAIM_TEMPLATES, lean(decode_resource_claim_template), rules.on_template
        ),
    ]
