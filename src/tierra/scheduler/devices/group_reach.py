"""Where a gang's PodGroup claims can be allocated, and where that lets its pods run.

A claim the whole PodGroup shares is allocated once, and its allocation's node selector
then binds every pod of the group: devices local to a node keep the gang on that node,
devices a slice publishes for several nodes (a ``nodeSelector``: a rack's fabric, a
ComputeDomain's channels) keep it on those nodes, ``allNodes`` devices leave it free.
kube-scheduler lets the group's first pod decide (its node's allocation is the group's);
tierra looks at every place the claims can be allocated before choosing, so the gang
goes where the claims' reach holds all of its pods.

``GroupReach`` holds, per node of the store's index, the reach allocating the claims
from that node gives (``LOCAL``: that node alone; ``r >= 0``: the nodes of reach ``r``;
``NONE``: they cannot be allocated there), and per node how many of the gang's pods the
node can take now (``fit``). ``DeviceClaims`` reads it: domains whose reaches hold fewer
than the gang's pods are excluded, nodes whose reach could not hold the gang take no
pod, and once a pod of the attempt is placed, the others only go within its reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.labels import Operator
from tierra.api.meta import ObjectMeta
from tierra.api.pod import NodeSelectorTerm, Pod, PodClaim
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.refusal import DeviceRefusal
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.devices.cluster import DeviceCluster
    from tierra.scheduler.state.store import ClusterStore

NONE, LOCAL = -1, -2
Selector = tuple[tuple[NodeSelectorTerm, ...], ...]  # one per claim; every one must match


@dataclass(frozen=True, slots=True)
class GroupReach:
    claims: tuple[str, ...]  # the group's unallocated claims (ns/name)
    pods: frozenset[str]  # the gang's pending pods that share them
    anchor: IntArray  # per node: LOCAL, NONE or the reach allocating there gives
    members: tuple[BoolArray, ...]  # per reach, the nodes it lets the pods use
    fit: IntArray  # per node, how many of the gang's pods it can take now

    @property
    def need(self) -> int:
        return len(self.pods)

    def allowed_from(self, node: int) -> BoolArray:
        """The nodes the gang's other pods may use once one is placed on ``node``."""
        out = np.zeros(len(self.anchor), dtype=bool)
        r = int(self.anchor[node])
        if r == LOCAL:
            out[node] = True
        elif r >= 0:
            out |= self.members[r]
        return out

    def holds(self) -> IntArray:
        """Per node: how many of the gang's pods the reach anchored there holds."""
        out = np.where(self.anchor == LOCAL, self.fit, 0)
        for r, mask in enumerate(self.members):
            out = np.where(self.anchor == r, int(self.fit[mask].sum()), out)
        return np.asarray(out, dtype=np.int64)

    def domain_holds(self, store: ClusterStore, domains: IntArray) -> IntArray:
        """Per domain: the most of the gang's pods one reach anchored inside it holds
        on the domain's own nodes."""
        ptr, idx = store.index.real_ptr, store.index.real_idx
        out = np.zeros(len(domains), dtype=np.int64)
        if not len(idx):
            return out
        starts = np.minimum(ptr[:-1], len(idx) - 1)
        nonempty = ptr[1:] > ptr[:-1]
        local = np.where(self.anchor[idx] == LOCAL, self.fit[idx], 0)
        best = np.where(nonempty, np.maximum.reduceat(local, starts), 0)
        for r, mask in enumerate(self.members):
            anchored = np.maximum.reduceat((self.anchor[idx] == r).astype(np.int64), starts)
            inside = np.add.reduceat(np.where(mask[idx], self.fit[idx], 0), starts)
            best = np.maximum(best, np.where(nonempty & (anchored > 0), inside, 0))
        return np.asarray(best[domains], dtype=np.int64)


def group_reach(
    store: ClusterStore, devices: DeviceCluster, pods: Sequence[Pod], fit: IntArray
) -> GroupReach | None:
    """The reach of the group claims ``pods`` share and nobody has allocated (None: none)."""
    shared: dict[str, PodClaim] = {}
    sharing: set[str] = set()
    for pod in pods:
        keys = devices.group_claim_keys(pod)
        for c in pod.resource_claims:
            key = f"{pod.namespace}/{c.claim_name}"
            if key in keys and devices.allocation_of(key) is None:
                shared.setdefault(key, c)
                sharing.add(pod.key)
    if not shared:
        return None
    first = next(p for p in pods if p.key in sharing)
    virtual = Pod(
        meta=ObjectMeta(name=f"{first.scheduling_group}.claims", namespace=first.namespace),
        resource_claims=tuple(shared[k] for k in sorted(shared)),
    )
    anchor, members = _anchors(store, devices, virtual)
    return GroupReach(tuple(sorted(shared)), frozenset(sharing), anchor, members, fit)


def _anchors(
    store: ClusterStore, devices: DeviceCluster, virtual: Pod
) -> tuple[IntArray, tuple[BoolArray, ...]]:
    names = store.index.node_names
    ix = store.index.node_ix
    anchor = np.full(len(names), NONE, dtype=np.int64)
    ok, _ = devices.eligible_unlocked(virtual, store.nodes)
    if not devices.allocator.selects():  # every device is some node's own
        for name in ok:
            if name in ix:
                anchor[ix[name]] = LOCAL
        return anchor, ()
    labels = {n.name: n.labels for n in store.nodes}
    reaches: dict[Selector, int] = {}
    for name in ok:
        if name not in ix:
            continue
        with devices.lock:
            plan = devices.plan(virtual, NodeInfo(name, labels.get(name, {})))
        if isinstance(plan, DeviceRefusal):
            continue
        selector = tuple(a.allocation.node_selector or () for a in plan)
        if any(_only(terms, name) for terms in selector):
            anchor[ix[name]] = LOCAL
        else:
            anchor[ix[name]] = reaches.setdefault(selector, len(reaches))
    members = tuple(_matching(sel, names, labels) for sel in reaches)
    return anchor, members


def _only(terms: tuple[NodeSelectorTerm, ...], name: str) -> bool:
    """``matchFields metadata.name In [name]``: the allocation of a node-local device."""
    if len(terms) != 1 or terms[0].match_expressions or len(terms[0].match_fields) != 1:
        return False
    r = terms[0].match_fields[0]
    return r.key == "metadata.name" and r.operator == Operator.IN and r.values == (name,)


def _matching(
    selector: Selector, names: Sequence[str], labels: Mapping[str, Mapping[str, str]]
) -> BoolArray:
    out = np.ones(len(names), dtype=bool)
    for terms in selector:
        if not terms:
            continue  # no node selector: every node
        for i, name in enumerate(names):
            if out[i] and not any(t.matches(name, labels.get(name, {})) for t in terms):
                out[i] = False
    return out
