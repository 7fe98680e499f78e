"""The volume filters: VolumeBinding, VolumeZone, NodeVolumeLimits (CSI) and
VolumeRestrictions (ReadWriteOncePod), over a pod's PersistentVolumeClaims.

As kube-scheduler decides them:

* a claim that does not exist refuses every node (an ephemeral volume's claim may not be
  made yet: the reason says so); an unbound claim whose class binds ``Immediate`` (or
  that names no class the cluster has) waits for the PV controller;
* a bound claim's PV must exist; its node affinity restricts the nodes, and its zone and
  region labels (``a__b`` for several) must hold the node's, on nodes that carry any;
* an unbound ``WaitForFirstConsumer`` claim needs, on the node, an Available PV of its
  class, big enough, with its access modes, reserved for no other claim, whose node
  affinity the node meets -- else a provisioner (not ``kubernetes.io/no-provisioner``)
  whose ``allowedTopologies`` the node meets; a claim already given a selected node
  is being provisioned there and allows only it;
* per CSI driver, the node's attached volumes plus the new ones stay within its CSINode
  ``allocatable.count``;
* a ReadWriteOncePod claim another placed pod uses refuses every node.

``decide`` says what the chosen node needs done before binding (VolumeBinding's reserve
and pre-bind): a PV to bind each unbound claim to, or "" to provision it by the
selected-node annotation. ``Storage.reserve`` keeps a PV from being chosen twice in one
session.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from tierra.api.pod import Pod
from tierra.api.storage import (
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    ZONE_LABELS,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import Marker, Verdict
from tierra.topology.arrays import BoolArray

BINDING = "VolumeBinding"
ZONE = "VolumeZone"
LIMITS = "NodeVolumeLimits"
RESTRICTIONS = "VolumeRestrictions"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
MAX_VOLUMES = "node(s) exceed max volume count"
NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)


@dataclass(slots=True)
class Storage:
    """The session's storage objects, and the PVs it has reserved so far."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)  # "ns/name"
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    csinodes: Mapping[str, CSINode] = field(default_factory=dict)
    drivers: Mapping[str, CSIDriver] = field(default_factory=dict)
    capacities: Mapping[str, CSIStorageCapacity] = field(default_factory=dict)  # "ns/name"
    reserved: dict[str, str] = field(default_factory=dict)  # PV -> claim, this session
    # per-node answers, each with the node table it is over: a session's view and the
    # store it reads may hold two tables at once (a node fed meanwhile), and read this
    # from two threads, so an answer is only reused over its own table
    _reach: dict[str, tuple[NodeTable, BoolArray]] = field(default_factory=dict)
    # per claim, the PVs that match it before reservations (``_candidates``)
    _matching: dict[str, list[PersistentVolume]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        claims: Iterable[PersistentVolumeClaim] = (),
        volumes: Iterable[PersistentVolume] = (),
        classes: Iterable[StorageClass] = (),
        csinodes: Iterable[CSINode] = (),
        *,
        drivers: Iterable[CSIDriver] = (),
        capacities: Iterable[CSIStorageCapacity] = (),
    ) -> Storage:
        return cls(
            {c.key: c for c in claims},
            {v.name: v for v in volumes},
            {s.name: s for s in classes},
            {n.name: n for n in csinodes},
            {d.name: d for d in drivers},
            {c.key: c for c in capacities},
        )

    def class_of(self, claim: PersistentVolumeClaim) -> StorageClass | None:
        name = claim.storage_class
        if name is None:  # the default class, as the admission plugin would have set
            defaults = sorted(s.name for s in self.classes.values() if s.default)
            name = defaults[0] if defaults else ""
        return self.classes.get(name)

    def reach(self, pv: PersistentVolume, nodes: NodeTable) -> BoolArray:
        """Nodes meeting ``pv``'s node affinity (memoized per PV and node table)."""
        found = self.memo(pv.name, nodes)
        if found is None:
            found = np.fromiter(
                (pv.reachable_from(n.name, n.labels) for n in nodes.nodes),
                dtype=bool,
                count=len(nodes),
            )
            self.remember(pv.name, nodes, found)
        return found

    def provisionable(self, sc: StorageClass, nodes: NodeTable) -> BoolArray:
        """Nodes a class's ``allowedTopologies`` admit (all without any), memoized."""
        key = f"class:{sc.name}"
        found = self.memo(key, nodes)
        if found is None:
            terms = sc.allowed_topologies
            found = np.fromiter(
                (not terms or any(t.matches(n.name, n.labels) for t in terms) for n in nodes.nodes),
                dtype=bool,
                count=len(nodes),
            )
            self.remember(key, nodes, found)
        return found

    def memo(self, key: str, nodes: NodeTable) -> BoolArray | None:
        found = self._reach.get(key)
        return found[1] if found is not None and found[0] is nodes else None

    def remember(self, key: str, nodes: NodeTable, answer: BoolArray) -> None:
        self._reach[key] = (nodes, answer)

    def copy(self) -> Storage:
        """Storage of its own with the same objects (``RulesBook.fork``): every table
        copied, whatever tables it has."""
        return Storage(**{f.name: dict(getattr(self, f.name)) for f in fields(self)})

    def invalidate(self) -> None:
        """Nodes or storage objects changed: what was computed over them is again."""
        self._reach.clear()
        self._matching.clear()

    def reserve(self, pv: str, claim: str) -> None:
        self.reserved[pv] = claim

    def release(self, pv: str) -> None:
        self.reserved.pop(pv, None)


def _claim_keys(pod: Pod) -> list[str]:
    return [f"{pod.namespace}/{c}" for c in (pod.rules.claims if pod.rules else ())]


def _zone_refused(pv: PersistentVolume, nodes: NodeTable) -> BoolArray:
    refused = np.zeros(len(nodes), dtype=bool)
    constrained = np.zeros(len(nodes), dtype=bool)
    for key in ZONE_LABELS:
        constrained |= nodes.values(key)[0] >= 0
    for key in ZONE_LABELS:
        value = pv.meta.labels.get(key)
        if value is None:
            continue
        allowed = set(value.split("__"))
        ga = key.replace("failure-domain.beta.kubernetes.io", "topology.kubernetes.io")
        have = np.array(
            [n.labels.get(key, n.labels.get(ga)) in allowed for n in nodes.nodes], dtype=bool
        )
        refused |= constrained & ~have
    return refused


def _candidates(
    claim: PersistentVolumeClaim, class_name: str, storage: Storage
) -> list[PersistentVolume]:
    """PVs that could take ``claim`` on some node (all but node affinity checked), as
    ``FindMatchingVolume`` filters them: a PV pre-bound to the claim first (alone: no
    other is considered for it), else Available ones of its class, big enough, of its
    volume mode, access modes and VolumeAttributesClass, matching its selector, not
    reserved for another claim; smallest first. All but the reservations is memoized
    per claim (a gang's caps and reserve ask for the same claims again and again)."""
    key = f"{claim.key}\0{class_name}"
    found = storage._matching.get(key)
    if found is None:
        found = storage._matching[key] = _matching(claim, class_name, storage)
    reserved = storage.reserved
    if not reserved:
        return found
    return [pv for pv in found if reserved.get(pv.name, claim.key) == claim.key]


def _matching(
    claim: PersistentVolumeClaim, class_name: str, storage: Storage
) -> list[PersistentVolume]:
    """``_candidates`` before the session's reservations (a PV pre-bound to the claim is
    reserved for no other: only its own claim's ``decide`` picks it)."""
    out = []
    for pv in storage.volumes.values():
        bound_here = pv.bound_to(claim)
        if pv.claim_ref and not bound_here:
            continue
        if pv.capacity < claim.request or pv.volume_mode != claim.volume_mode:
            continue
        if pv.attributes_class != claim.attributes_class:
            continue  # the VolumeAttributesClass must be the claim's (GA since 1.34)
        if bound_here:
            return [pv]  # pre-bound: this one or none (``IsVolumeBoundToClaim``)
        if pv.phase != "Available" or pv.storage_class != class_name:
            continue
        if claim.selector is not None and not claim.selector.matches(pv.meta.labels):
            continue
        if not set(claim.access_modes) <= set(pv.access_modes):
            continue
        out.append(pv)
    return sorted(out, key=lambda v: (v.capacity, v.name))


def can_provision(sc: StorageClass) -> bool:
    return bool(sc.provisioner) and sc.provisioner != NO_PROVISIONER


def enough_capacity(
    claim: PersistentVolumeClaim, sc: StorageClass, nodes: NodeTable, storage: Storage
) -> BoolArray:
    """Nodes where the class's provisioner can make a volume of the claim's size
    (``hasEnoughCapacity``): everywhere unless its CSIDriver has ``storageCapacity: true``
    and the claim asks for storage; then where a CSIStorageCapacity of the class, whose
    ``maximumVolumeSize`` (else ``capacity``) holds the claim, selects the node."""
    driver = storage.drivers.get(sc.provisioner)
    if claim.request <= 0 or driver is None or not driver.storage_capacity:
        return np.ones(len(nodes), dtype=bool)
    key = f"capacity:{sc.name}:{claim.request}"
    found = storage.memo(key, nodes)
    if found is None:
        found = np.zeros(len(nodes), dtype=bool)
        for cap in storage.capacities.values():
            limit = cap.limit
            if cap.storage_class != sc.name or limit is None or limit < claim.request:
                continue
            topology = cap.node_topology
            if topology is None:
                continue  # reachable from no node
            found |= np.fromiter(
                (topology.matches(n.labels) for n in nodes.nodes), dtype=bool, count=len(nodes)
            )
        storage.remember(key, nodes, found)
    return found


@dataclass(slots=True)
class Matching:
    """Per node, what a pod's unbound WaitForFirstConsumer claims get there
    (``findMatchingVolumes``, then ``checkVolumeProvisions``): claims smallest first, each
    the smallest PV left on that node -- never one an earlier claim of the pod took -- or
    else provisioning, which needs a provisioner whose ``allowedTopologies`` admit the node
    and, for a driver that reports it, enough capacity."""

    bindable: BoolArray  # every claim has a PV or can be provisioned
    space: BoolArray  # provisioning has the capacity it needs


def match(
    delayed: list[tuple[PersistentVolumeClaim, StorageClass]], nodes: NodeTable, storage: Storage
) -> Matching:
    n = len(nodes)
    taken: dict[str, BoolArray] = {}  # PV -> nodes where an earlier claim of the pod took it
    bindable = np.ones(n, dtype=bool)
    space = np.ones(n, dtype=bool)
    for claim, sc in sorted(delayed, key=lambda cs: cs[0].request):
        found = np.zeros(n, dtype=bool)
        for pv in _candidates(claim, sc.name, storage):
            free = storage.reach(pv, nodes) & ~found
            used = taken.get(pv.name)
            if used is not None:
                free &= ~used
            taken[pv.name] = free if used is None else used | free
            found |= free
        if found.all():
            continue
        provision = storage.provisionable(sc, nodes) if can_provision(sc) else np.zeros(n, bool)
        bindable &= found | provision
        space &= found | ~provision | enough_capacity(claim, sc, nodes, storage)
    return Matching(bindable, space)


def _binding(pod: Pod, nodes: NodeTable, storage: Storage, mark: Marker, zone: Marker) -> None:
    delayed: list[tuple[PersistentVolumeClaim, StorageClass]] = []
    for key in _claim_keys(pod):
        claim = storage.claims.get(key)
        if claim is None:
            name = key.split("/", 1)[1]
            ephemeral = name.startswith(f"{pod.name}-")
            mark.refuse_all(
                f"waiting for ephemeral volume controller to create the persistentvolumeclaim "
                f'"{name}"'
                if ephemeral
                else f'persistentvolumeclaim "{name}" not found'
            )
            continue
        if claim.bound:
            pv = storage.volumes.get(claim.volume_name)
            if pv is None:
                mark.refuse_all(PV_NOT_EXIST)
                continue
            mark.refuse(~storage.reach(pv, nodes), NODE_CONFLICT)
            zone.refuse(_zone_refused(pv, nodes), ZONE_CONFLICT)
            continue
        sc = storage.class_of(claim)
        if sc is None or sc.binding_mode != WAIT_FOR_FIRST_CONSUMER or claim.volume_name:
            mark.refuse_all(UNBOUND_IMMEDIATE)  # a pre-bound claim too: the PV controller's
            continue
        if claim.selected_node:  # being provisioned there: that node, if it still can be
            at = np.zeros(len(nodes), dtype=bool)
            if (i := nodes.position.get(claim.selected_node)) is not None:
                at[i] = True
            ok = at & storage.provisionable(sc, nodes) & can_provision(sc)
            mark.refuse(~ok, BIND_CONFLICT)
            mark.refuse(~enough_capacity(claim, sc, nodes, storage), NOT_ENOUGH_SPACE)
            continue
        delayed.append((claim, sc))
    if delayed:
        found = match(delayed, nodes, storage)
        mark.refuse(~found.bindable, BIND_CONFLICT)
        mark.refuse(~found.space, NOT_ENOUGH_SPACE)


def _driver(claim: PersistentVolumeClaim, storage: Storage) -> tuple[str, str]:
    """(CSI driver, volume identity) of a claim; ("", "") when none is known."""
    if claim.bound:
        pv = storage.volumes.get(claim.volume_name)
        return (pv.csi_driver, pv.name) if pv is not None and pv.csi_driver else ("", "")
    sc = storage.class_of(claim)
    return (sc.provisioner, f"claim:{claim.key}") if sc is not None else ("", "")


def _limits(pod: Pod, nodes: NodeTable, placed: PodIndex, storage: Storage, mark: Marker) -> None:
    wanted: dict[str, set[str]] = {}
    for key in _claim_keys(pod):
        claim = storage.claims.get(key)
        if claim is not None:
            driver, volume = _driver(claim, storage)
            if driver:
                wanted.setdefault(driver, set()).add(volume)
    limited = [
        (i, n.limits) for i, name in enumerate(nodes.names) if (n := storage.csinodes.get(name))
    ]
    if not wanted or not limited:
        return
    attached: dict[tuple[int, str], set[str]] = {}
    for key, users in placed.claim_users.items():
        claim = storage.claims.get(key)
        if claim is None:
            continue
        driver, volume = _driver(claim, storage)
        if driver in wanted:
            for user in users:
                at = nodes.position.get(placed.entries[user].node)
                if at is not None:
                    attached.setdefault((at, driver), set()).add(volume)
    over = np.zeros(len(nodes), dtype=bool)
    for i, limits in limited:
        for driver, volumes in wanted.items():
            limit = limits.get(driver)
            have = attached.get((i, driver), set())
            if limit is not None and len(have | volumes) > limit:
                over[i] = True
    mark.refuse(over, MAX_VOLUMES)


def evaluate(
    pod: Pod, nodes: NodeTable, placed: PodIndex, storage: Storage
) -> tuple[Verdict, ...] | None:
    """One verdict per volume filter that looked (in kube-scheduler's order); None when
    the pod has no claim."""
    if pod.rules is None or not pod.rules.claims:
        return None
    count = len(nodes)
    restrictions, binding, zone, limits = (
        Marker(RESTRICTIONS, count),
        Marker(BINDING, count),
        Marker(ZONE, count),
        Marker(LIMITS, count),
    )
    for key in _claim_keys(pod):
        claim = storage.claims.get(key)
        rwop = claim is not None and READ_WRITE_ONCE_POD in claim.access_modes
        if rwop and placed.claim_users.get(key, set()) - {pod.key}:
            restrictions.refuse_all(RWOP_CONFLICT)
    _binding(pod, nodes, storage, binding, zone)
    _limits(pod, nodes, placed, storage, limits)
    return tuple(m.done() for m in (restrictions, binding, zone, limits))


@dataclass(frozen=True, slots=True)
class ClaimAction:
    """Before binding the pod: bind ``claim`` to PV ``volume``, or (``volume`` "")
    provision it by setting the selected-node annotation to ``node``."""

    claim: str
    volume: str
    node: str


def unbound_delayed(pod: Pod, storage: Storage) -> list[tuple[PersistentVolumeClaim, StorageClass]]:
    """The pod's unbound WaitForFirstConsumer claims not yet given a node, smallest
    first: what its reserve must find a PV for, or provision."""
    out = []
    for key in _claim_keys(pod):
        claim = storage.claims.get(key)
        if claim is None or claim.bound or claim.selected_node or claim.volume_name:
            continue
        sc = storage.class_of(claim)
        if sc is not None and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER:
            out.append((claim, sc))
    return sorted(out, key=lambda cs: cs[0].request)


def decide(
    pod: Pod, node: int, nodes: NodeTable, storage: Storage
) -> tuple[ClaimAction, ...] | None:
    """What the chosen node needs for the pod's unbound WaitForFirstConsumer claims, as the
    filter matched them (``match``: smallest claim first, smallest PV left); the PVs chosen
    are reserved in ``storage`` (``release`` them if the gang rolls back).

    None, with nothing reserved, when a claim has no PV left there and its class cannot
    provision there: the PVs a gang's earlier pods took are gone, and a class without a
    provisioner (``kubernetes.io/no-provisioner``, local PVs) is never given a selected
    node -- no one would answer it (``checkVolumeProvisions``)."""
    out = []
    fresh: list[str] = []  # PVs this call reserved (not those reserved for the claim before)
    name = nodes.names[node]
    for claim, sc in unbound_delayed(pod, storage):
        pv = next(
            (v for v in _candidates(claim, sc.name, storage) if storage.reach(v, nodes)[node]),
            None,
        )
        if pv is None and not (can_provision(sc) and storage.provisionable(sc, nodes)[node]):
            for volume in fresh:
                storage.release(volume)
            return None
        if pv is not None:
            if pv.name not in storage.reserved:
                fresh.append(pv.name)
            storage.reserve(pv.name, claim.key)  # the next claim of the pod sees it taken
        out.append(ClaimAction(claim.key, pv.name if pv is not None else "", name))
    return tuple(out)


@dataclass(slots=True)
class Taken:
    """The PVs an attempt's pods will take (``decide``, in placement order), for the pods
    ``done`` so far: each shape's caps go on from where the last one stopped, not from
    the attempt's first pod (a gang of k pods: k decides, not k * k / 2)."""

    done: list[tuple[str, int]] = field(default_factory=list)  # (pod key, node position)
    picks: dict[str, str] = field(default_factory=dict)  # PV -> claim


def bindable_after(
    pod: Pod,
    before: Sequence[tuple[Pod, int]],
    nodes: NodeTable,
    storage: Storage,
    taken: Taken | None = None,
) -> BoolArray | None:
    """Nodes where ``pod``'s unbound WaitForFirstConsumer claims still find a PV (or can be
    provisioned) once ``before`` -- the pods of its gang placed ahead of it in this
    attempt, each at its node position -- took theirs, as their reserve will take them
    (``decide``, in the same order): kube-scheduler decides a gang's pods one by one,
    each after the last one's ``AssumePodVolumes``. None when the pod has no such claim.
    ``taken`` carries the picks from one call to the next while ``before`` only grows;
    ``storage`` is left as it was found."""
    delayed = unbound_delayed(pod, storage)
    if not delayed:
        return None
    taken = taken if taken is not None else Taken()
    seen = [(p.key, n) for p, n in before[: len(taken.done)]]
    if seen != taken.done:  # the attempt was rolled back meanwhile: from its start
        taken.done, taken.picks = [], {}
    kept = dict(storage.reserved)
    try:
        storage.reserved.update(taken.picks)
        for other, n in before[len(taken.done) :]:
            decide(other, n, nodes, storage)
            taken.done.append((other.key, n))
        taken.picks = {pv: c for pv, c in storage.reserved.items() if pv not in kept}
        return match(delayed, nodes, storage).bindable
    finally:
        storage.reserved.clear()
        storage.reserved.update(kept)


LASTING = frozenset({NODE_CONFLICT, ZONE_CONFLICT})
"""Refusals that stay however the cluster changes short of the pod's own claims: a bound
PV's node affinity and zone. The others -- a claim or a PV not made yet, PVs others hold,
storage or attach slots in use -- are waits, and explain must not say "can never fit"."""


def lasting_codes(verdict: Verdict) -> list[int]:
    """The codes of ``verdict``'s ``LASTING`` reasons."""
    return [i + 1 for i, why in enumerate(verdict.reasons) if why in LASTING]


def local_pool(
    pods: Iterable[Pod], nodes: NodeTable, storage: Storage
) -> tuple[int, BoolArray] | None:
    """How many unbound WaitForFirstConsumer claims ``pods`` (a gang) bring whose class
    cannot provision, and, one row per free PV that could take any of them, the nodes
    it reaches: a domain can hold the gang only if at least that many of these PVs reach
    its nodes (a necessary count, the search's first cut; the caps and ``reserve`` match
    them one by one). None when the pods bring no such claim."""
    wanted: dict[str, tuple[PersistentVolumeClaim, StorageClass]] = {}
    for pod in pods:
        for claim, sc in unbound_delayed(pod, storage):
            if not can_provision(sc):
                wanted[claim.key] = (claim, sc)
    if not wanted:
        return None
    pool = {pv.name: pv for c, sc in wanted.values() for pv in _candidates(c, sc.name, storage)}
    rows = [storage.reach(pv, nodes) for _, pv in sorted(pool.items())]
    reach = np.array(rows, dtype=bool) if rows else np.zeros((0, len(nodes)), dtype=bool)
    return len(wanted), reach
