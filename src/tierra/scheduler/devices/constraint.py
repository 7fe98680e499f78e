"""DRA as a constraint of the session: which nodes can serve a pod's claims, and the
devices reserved for a whole gang before the session keeps it.

kube-scheduler's DynamicResources plugin in the constraint protocol:

* ``node_mask`` (Filter): a pod with claims may use only the nodes where the structured
  allocator can allocate them now (``DeviceCluster.eligible``); the mask's exclusion
  names the first reason, as kube-scheduler's "cannot allocate all claims".
* ``reserve`` (Reserve/Unreserve): once a domain holds the gang, every pod's claims are
  allocated on its node, one pod after the other, each seeing the devices the pods
  before it took; one that cannot be allocated refuses the domain (the session rolls
  the attempt back and tries the next candidate), so a gang is all or nothing with its
  devices. The allocations go to ``DeviceCluster.assumed`` (they count as used at once)
  with an undo on the transaction's log; the adapter's binder writes them to the API
  (or releases them when the binding fails).

* ``candidates`` and ``node_caps`` for claims the gang's PodGroup shares
  (``group_claims.py``, ``group_reach.py``): allocated once, they bind every pod of the
  group to their node selector, so domains where no reach of those claims holds the
  gang are excluded, nodes whose reach could not hold it take no pod, and once a pod of
  the attempt is placed the others go only within its reach.

How many pods of a gang a node can hold by devices is counted beforehand as room
(``counts.py``: one resource per DeviceClass), so the search rarely proposes a domain
``reserve`` must refuse. The DRA state is the store's extension ``devices``, fed by the
adapter (the live feed, or ``tierra schedule`` from a snapshot); a pod with claims and no
DRA state at all is never placed (never bound without its devices).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import (
    Ask,
    Candidacy,
    Constraint,
    Cycle,
    NodeMask,
    Refusal,
)
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.refusal import DeviceRefusal
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.devices.cluster import DeviceCluster
    from tierra.scheduler.devices.group_reach import GroupReach
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore

EXTENSION = "devices"
UNCAPPED = 1 << 30
REACH = "group reach"


def device_state(store: ClusterStore) -> DeviceCluster | None:
    """The DRA state the adapter put in the store (the CEL runtime loads only with it)."""
    found = store.extensions.get(EXTENSION)
    if found is None:
        return None
    from tierra.scheduler.devices.cluster import DeviceCluster  # noqa: PLC0415

    return found if isinstance(found, DeviceCluster) else None


@dataclass(frozen=True, slots=True)
class DeviceClaims(Constraint):
    name = EXTENSION

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # masks and reserves for pods with claims only

    def applies(self, cycle: Cycle) -> bool:
        """Only for a gang with a pod with claims: the PodGroup's claims a pod shares are
        among its own (``group_reach`` reads only pods with claims), and ``reserve``
        allocates only pods with claims (``node_mask`` is asked regardless)."""
        gang = cycle.gang
        return gang is None or any(p.resource_claims for p in gang.pending)

    def mask_key(self, pod: Pod) -> Hashable:
        # Each pod with claims has claims of its own: its own mask (pods sharing one
        # claim still differ in what else they hold).
        return pod.key if pod.resource_claims else None

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        if not pod.resource_claims:
            return None
        names = store.index.node_names
        devices = device_state(store)
        mask = np.zeros(len(names), dtype=bool)
        if devices is None:
            return NodeMask(
                mask, (("without DRA state (no DeviceClasses, claims, slices)", len(names)),)
            )
        ok, refusal = devices.eligible_unlocked(pod, store.nodes)
        mask, excluded = _marked(devices, ok, store.index.node_ix, len(names))
        if not excluded:
            return NodeMask(mask)
        why = (
            f"cannot allocate the pod's claims ({refusal})"
            if refusal
            else "cannot allocate the pod's claims"
        )
        nodes, ix, n = store.nodes, store.index.node_ix, len(names)

        def empty() -> BoolArray:  # nothing running: no device in use (explain asks)
            return _marked(devices, devices.eligible_unlocked(pod, nodes, empty=True)[0], ix, n)[0]

        return NodeMask(mask, ((why, excluded),), empty)

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        reach = _reach(cycle, ask)
        if reach is None or not len(domains):
            return None
        holds = reach.domain_holds(cycle.store, domains)
        kept = holds >= reach.need
        if kept.all():
            return None
        values = (("claim", reach.claims[0]), ("need", reach.need), ("best", int(holds.max())))
        return Candidacy(excluded=kept, refusal=Refusal(self, REACH, int((~kept).sum()), values))

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        reach = _reach(cycle, None)
        if reach is None or not any(p.key in reach.pods for p in shape.pods):
            return None
        placed = [n for p, n, _ in cycle.overlay.assigned if p.key in reach.pods]
        if placed:
            allowed = reach.allowed_from(placed[0])
        else:
            data = cycle.data.setdefault(self.name, {})
            if "enough" not in data:
                data["enough"] = reach.holds() >= reach.need
            allowed = data["enough"]
        return np.where(allowed[nodes], UNCAPPED, 0).astype(np.int64)

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        reach = _reach(cycle, None)
        if reach is None:
            return None
        best = int(reach.holds().max()) if len(reach.anchor) else 0
        values = (("claim", reach.claims[0]), ("need", reach.need), ("best", best))
        return Refusal(self, REACH, capped, values)

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        claimants = [(p, n) for p, n in placed if p.resource_claims]
        if not claimants:
            return None
        devices = device_state(cycle.store)
        if devices is None:
            return Refusal(self, "no DRA state", len(claimants))
        nodes: list[Node] = cycle.store.nodes
        taken: list[str] = []

        def undo() -> None:
            with devices.lock:
                for key in taken:
                    devices.assumed.pop(key, None)
                devices.changed()

        with devices.lock:
            for pod, n in claimants:
                node = nodes[n]
                plan = devices.plan(pod, NodeInfo(node.name, node.labels))
                if isinstance(plan, DeviceRefusal):
                    undo()
                    return Refusal(self, "devices", 1, (("pod", pod.key), ("reason", str(plan))))
                devices.assume(plan)
                taken.extend(a.claim for a in plan)
        cycle.overlay.on_undo(undo)
        return None

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what == "devices":
            return f"Pod/{refusal.value('pod')}: {refusal.value('reason')}"
        if refusal.what == REACH:
            claim, need = refusal.value("claim"), refusal.value("need")
            where = (
                f"{need} pods must run where ResourceClaim/{claim}, their PodGroup's, is allocated"
            )
            if domain is not None:
                return f"{where}, and no such place here holds them all"
            best = refusal.value("best")
            most = f": at most {best} fit in any such place" if best is not None else ""
            return f"{where}{most} ({refusal.count} nodes or domains ruled out)"
        return f"{refusal.count} pods with claims and no DRA state"


def _marked(
    devices: DeviceCluster, ok: tuple[str, ...], ix: Mapping[str, int], n: int
) -> tuple[BoolArray, int]:
    """The mask of the nodes ``ok`` names and how many it leaves out: a gang's pods with
    equal claims share one remembered answer (the same tuple), so it is marked once per
    gang, not once per pod (a copy each: masks are narrowed in place downstream)."""
    memo = devices.mask_memo
    if memo is not None and memo[0] is ok and memo[1] is ix:
        return memo[2].copy(), memo[3]
    mask = np.zeros(n, dtype=bool)
    _mark(mask, ok, ix)
    excluded = n - int(mask.sum())
    devices.mask_memo = (ok, ix, mask, excluded)
    return mask.copy(), excluded


def _mark(mask: np.ndarray, names: Sequence[str], ix: Mapping[str, int]) -> None:
    for name in names:
        i = ix.get(name)
        if i is not None:
            mask[i] = True


def _reach(cycle: Cycle, ask: Ask | None) -> GroupReach | None:
    """The reach of the gang's unallocated PodGroup claims, once per attempt."""
    data = cycle.data.setdefault(EXTENSION, {})
    if "reach" in data:
        found: GroupReach | None = data["reach"]
        return found
    devices = device_state(cycle.store)
    gang = cycle.gang
    if devices is None or gang is None or not devices.groups:
        data["reach"] = None
        return None
    from tierra.scheduler.devices.group_reach import group_reach  # noqa: PLC0415

    pods = [p for p in gang.pending if p.resource_claims]
    fit = _fit(cycle, pods, ask)
    data["reach"] = group_reach(cycle.store, devices, pods, fit)
    return data["reach"]  # type: ignore[no-any-return]


def _fit(cycle: Cycle, pods: Sequence[Pod], ask: Ask | None) -> IntArray:
    """Per node, how many of ``pods`` it can take now (the smallest request; a pod's
    own node mask where the ask carries one)."""
    store = cycle.store
    if not pods:
        return np.zeros(len(store.index.node_names), dtype=np.int64)
    vecs = [store.request_vector(p) for p in pods]
    smallest = min(vecs, key=lambda v: int(v.sum()))
    mask = None
    if ask is not None:
        masks = [s.eligibility.mask for s in ask.demand.shapes]
        mask = np.logical_or.reduce(masks) if masks else None
    return store.capacity.fit_counts(smallest, mask)
