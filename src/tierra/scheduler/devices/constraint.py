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

How many pods of a gang a node can hold by devices is counted beforehand as room
(``counts.py``: one resource per DeviceClass), so the search rarely proposes a domain
``reserve`` must refuse. The DRA state is the store's extension ``devices``, fed by the
adapter (the live feed, or ``tierra schedule`` from a snapshot); a pod with claims and no
DRA state at all is never placed (never bound without its devices).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.scheduler.constraints.protocol import Constraint, Cycle, NodeMask, Refusal
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.refusal import DeviceRefusal

if TYPE_CHECKING:
    from tierra.scheduler.devices.cluster import DeviceCluster
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.arrays import BoolArray

EXTENSION = "devices"


def device_state(store: ClusterStore) -> DeviceCluster | None:
    """The DRA state the adapter put in the store (the CEL runtime loads only with it)."""
    found = store.extensions.get(EXTENSION)
    if found is None:
        return None
    from tierra.scheduler.devices.cluster import DeviceCluster  # noqa: PLC0415

    return found if isinstance(found, DeviceCluster) else None


# Per eligibility answer (its names tuple) and index: the mask made of it.
_MASKS: dict[int, tuple[tuple[str, ...], object, NodeMask]] = {}


def _mask(
    store: ClusterStore, ok: tuple[str, ...], refusal: DeviceRefusal | None, mask: BoolArray
) -> NodeMask:
    """``mask`` (all False) with the nodes named in ``ok``, and why the others are not."""
    names = store.index.node_names
    ix = store.index.node_ix
    for name in ok:
        i = ix.get(name)
        if i is not None:
            mask[i] = True
    excluded = len(names) - int(mask.sum())
    if not excluded:
        return NodeMask(mask)
    why = (
        f"cannot allocate the pod's claims ({refusal})"
        if refusal
        else "cannot allocate the pod's claims"
    )
    return NodeMask(mask, ((why, excluded),))


@dataclass(frozen=True, slots=True)
class DeviceClaims(Constraint):
    name = EXTENSION

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # masks and reserves for pods with claims only

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
        if not ok:
            return _mask(store, ok, refusal, mask)
        # pods with equal claims share one answer (the same tuple): one mask for them all
        kept = _MASKS.get(id(ok))
        if kept is not None and kept[0] is ok and kept[1] is store.index:
            return kept[2]
        found = _mask(store, ok, refusal, mask)
        if len(_MASKS) > 64:
            _MASKS.clear()
        _MASKS[id(ok)] = (ok, store.index, found)
        return found

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
                for a in plan:
                    devices.assumed[a.claim] = a.allocation
                    taken.append(a.claim)
                devices.changed()
        cycle.overlay.on_undo(undo)
        return None

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what == "devices":
            return f"Pod/{refusal.value('pod')}: {refusal.value('reason')}"
        return f"{refusal.count} pods with claims and no DRA state"
