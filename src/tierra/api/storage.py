"""Storage objects and Namespaces: what decides where a pod with volumes may run.

PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities as the VolumeBinding, VolumeZone, NodeVolumeLimits and
VolumeRestrictions plugins read them; Namespaces for their labels (an affinity term's
``namespaceSelector``). Only what those plugins read is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.labels import (
    NODE_SELECTOR_OPERATORS,
    LabelSelector,
    Operator,
    Requirement,
    decode_label_selector,
    decode_requirement,
)
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.pod import NodeSelectorTerm
from tierra.api.quantity import QuantityError, to_milli
from tierra.errors import Origin, Problem

STORAGE_GROUP = "storage.k8s.io"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD)
FILESYSTEM = "Filesystem"  # a volumeMode left out
VOLUME_MODES = (FILESYSTEM, "Block")
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # the PV controller's: binding done
# Zone and region labels VolumeZone compares between a PV and a node (GA and beta names).
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistentVolumeClaim:
    meta: ObjectMeta
    storage_class: str | None = None  # None: the cluster's default class (or none)
    volume_name: str = ""  # spec.volumeName: bound (or pre-bound) to this PV
    access_modes: tuple[str, ...] = ()
    request: int = 0  # spec.resources.requests.storage, milli-units
    phase: str = "Pending"
    volume_mode: str = FILESYSTEM
    selector: LabelSelector | None = None  # spec.selector: the PVs it may bind (None: any)
    attributes_class: str = ""  # spec.volumeAttributesClassName
    origin: Origin | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def selected_node(self) -> str:
        return self.meta.annotations.get(SELECTED_NODE, "")

    @property
    def bound(self) -> bool:
        """Bound as kube-scheduler reads it (``isPVCFullyBound``): a volume named and the
        PV controller's bind-completed annotation; a volume named alone is pre-bound."""
        return bool(self.volume_name) and BIND_COMPLETED in self.meta.annotations


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistentVolume:
    meta: ObjectMeta
    node_affinity: tuple[NodeSelectorTerm, ...] = ()  # required terms (ORed); () = any node
    claim_ref: str = ""  # "ns/name" of the claim it is bound or reserved for
    claim_uid: str = ""  # spec.claimRef.uid ("": any claim of that name)
    storage_class: str = ""
    access_modes: tuple[str, ...] = ()
    capacity: int = 0  # spec.capacity.storage, milli-units
    csi_driver: str = ""
    phase: str = "Available"
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""  # spec.volumeAttributesClassName
    origin: Origin | None = field(default=None, compare=False)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """``IsVolumeBoundToClaim``: its claimRef names the claim (and its UID, if any)."""
        if self.claim_ref != claim.key:
            return False
        return not self.claim_uid or self.claim_uid == claim.meta.uid

    @property
    def name(self) -> str:
        return self.meta.name

    def reachable_from(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.node_affinity:
            return True
        return any(t.matches(node_name, labels) for t in self.node_affinity)


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageClass:
    meta: ObjectMeta
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[NodeSelectorTerm, ...] = ()
    default: bool = False  # storageclass.kubernetes.io/is-default-class
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True, kw_only=True)
class CSINode:
    """Per node, how many volumes each CSI driver may attach (None: no limit given)."""

    meta: ObjectMeta
    limits: Mapping[str, int | None] = field(default_factory=dict)
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True, kw_only=True)
class CSIDriver:
    """A CSI driver; ``storage_capacity``: it publishes CSIStorageCapacity objects and
    the scheduler must check them before provisioning (``spec.storageCapacity``)."""

    meta: ObjectMeta
    storage_capacity: bool = False
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


@dataclass(frozen=True, slots=True, kw_only=True)
class CSIStorageCapacity:
    """What a driver can still provision for a class, from the nodes its topology selects."""

    meta: ObjectMeta
    storage_class: str = ""
    capacity: int | None = None  # milli-units; None: not reported
    maximum_volume_size: int | None = None
    node_topology: LabelSelector | None = None  # None: reachable from no node
    origin: Origin | None = field(default=None, compare=False)

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def limit(self) -> int | None:
        """``volumeLimit``: the largest volume it allows, else its capacity."""
        return self.maximum_volume_size if self.maximum_volume_size is not None else self.capacity


@dataclass(frozen=True, slots=True, kw_only=True)
class Namespace:
    meta: ObjectMeta
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name


def _node_terms(f: Fields, key: str) -> tuple[NodeSelectorTerm, ...]:
    terms = []
    for t in f.objects(key):
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


def _modes(f: Fields) -> tuple[str, ...]:
    out = []
    for i, mode in enumerate(f.str_list("accessModes")):
        if mode not in ACCESS_MODES:
            f.report.add(f"{f.at('accessModes')}[{i}]", f"must be one of {', '.join(ACCESS_MODES)}")
        else:
            out.append(mode)
    return tuple(out)


def _report(
    raw: Mapping[str, Any],
    kind: str,
    origin: Origin | None,
    sink: list[Problem],
    *,
    namespaced: bool,
) -> Fields:
    return Fields(raw, "", Report(origin, object_ref(raw, kind, namespaced=namespaced), sink))


def decode_pvc(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> PersistentVolumeClaim:
    f = _report(raw, "PersistentVolumeClaim", origin, sink, namespaced=True)
    meta = decode_meta(f, namespaced=True)
    spec = f.obj("spec")
    return PersistentVolumeClaim(
        meta=meta,
        storage_class=spec.opt_str("storageClassName"),
        volume_name=spec.string("volumeName"),
        access_modes=_modes(spec),
        request=spec.obj("resources").resources("requests").get("storage", 0),
        phase=f.obj("status").string("phase", "Pending"),
        volume_mode=spec.enum("volumeMode", VOLUME_MODES, FILESYSTEM),
        selector=decode_label_selector(spec.obj("selector"))
        if spec.raw("selector") is not None
        else None,
        attributes_class=spec.string("volumeAttributesClassName"),
        origin=origin,
    )


def decode_pv(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> PersistentVolume:
    f = _report(raw, "PersistentVolume", origin, sink, namespaced=False)
    meta = decode_meta(f, namespaced=False)
    spec = f.obj("spec")
    ref = spec.obj("claimRef")
    claim = f"{ref.string('namespace')}/{ref.string('name')}" if ref.string("name") else ""
    required = spec.obj("nodeAffinity").obj("required")
    return PersistentVolume(
        meta=meta,
        node_affinity=_node_terms(required, "nodeSelectorTerms"),
        claim_ref=claim,
        claim_uid=ref.string("uid"),
        storage_class=spec.string("storageClassName"),
        access_modes=_modes(spec),
        capacity=spec.resources("capacity").get("storage", 0),
        csi_driver=spec.obj("csi").string("driver"),
        phase=f.obj("status").string("phase", "Available"),
        volume_mode=spec.enum("volumeMode", VOLUME_MODES, FILESYSTEM),
        attributes_class=spec.string("volumeAttributesClassName"),
        origin=origin,
    )


def decode_storage_class(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> StorageClass:
    f = _report(raw, "StorageClass", origin, sink, namespaced=False)
    meta = decode_meta(f, namespaced=False)
    terms = []
    for t in f.objects("allowedTopologies"):
        # allowedTopologies: matchLabelExpressions of key + values (In)
        reqs = []
        for e in t.objects("matchLabelExpressions"):
            values = tuple(e.str_list("values"))
            reqs.append(Requirement(e.string("key", required=True), Operator.IN, values))
        terms.append(NodeSelectorTerm(tuple(reqs)))
    return StorageClass(
        meta=meta,
        provisioner=f.string("provisioner", required=True),
        binding_mode=f.enum("volumeBindingMode", (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER), IMMEDIATE),
        allowed_topologies=tuple(terms),
        default=meta.annotations.get("storageclass.kubernetes.io/is-default-class") == "true",
        origin=origin,
    )


def decode_csinode(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> CSINode:
    f = _report(raw, "CSINode", origin, sink, namespaced=False)
    meta = decode_meta(f, namespaced=False)
    limits: dict[str, int | None] = {}
    for d in f.obj("spec").objects("drivers"):
        name = d.string("name", required=True)
        limits[name] = d.obj("allocatable").opt_int("count", minimum=0)
    return CSINode(meta=meta, limits=limits, origin=origin)


def decode_namespace(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> Namespace:
    f = _report(raw, "Namespace", origin, sink, namespaced=False)
    return Namespace(meta=decode_meta(f, namespaced=False), origin=origin)


def decode_csidriver(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> CSIDriver:
    f = _report(raw, "CSIDriver", origin, sink, namespaced=False)
    meta = decode_meta(f, namespaced=False)
    return CSIDriver(
        meta=meta, storage_capacity=f.obj("spec").boolean("storageCapacity"), origin=origin
    )


def _quantity(f: Fields, key: str) -> int | None:
    value = f.raw(key)
    if value is None:
        return None
    try:
        milli = to_milli(value)
    except QuantityError as exc:
        f.problem(key, str(exc))
        return None
    if milli < 0:
        f.problem(key, f"must not be negative, got {value!r}")
        return None
    return milli


def decode_capacity(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> CSIStorageCapacity:
    f = _report(raw, "CSIStorageCapacity", origin, sink, namespaced=True)
    meta = decode_meta(f, namespaced=True)
    topology = f.obj("nodeTopology")
    return CSIStorageCapacity(
        meta=meta,
        storage_class=f.string("storageClassName", required=True),
        capacity=_quantity(f, "capacity"),
        maximum_volume_size=_quantity(f, "maximumVolumeSize"),
        node_topology=decode_label_selector(topology)
        if f.raw("nodeTopology") is not None
        else None,
        origin=origin,
    )
