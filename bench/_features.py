"""The scale benchmark's gangs with this wave's constraints on: DRA claims, pod rules,
Kueue slices and rank order, exclusive domains and bounded wait (issues 20, 21, 23, 24).

``featured_cluster`` is ``fat_tree`` with what those constraints read: every node
labelled with its host name and its leaf (pod rules' topology keys), and a DRA pool --
the last tenth of the spines -- whose nodes publish their 8 GPUs as ResourceSlices
(NVIDIA's DRA driver's attributes, one PCIe root per two GPUs) instead of
``nvidia.com/gpu``. ``featured`` turns a gang of the benchmark into one that uses a
feature:

* ``dra``: each pod claims its GPUs through its own ResourceClaim (exactly N of class
  ``gpu.nvidia.com``) instead of asking ``nvidia.com/gpu``: the DRA pool only;
* ``rules``: each pod keeps apart from its gang's other pods on hosts (required
  anti-affinity) and the gang spreads over leaves (``maxSkew`` 8, DoNotSchedule);
* ``kueue``: ``topology.tierra.dev/slices`` cuts the gang into slices of 16 pods, each
  in one leaf, and ``rank-label`` gives the pods their ranks' slots;
* ``exclusive``: ``exclusive-tier: 1``, whole leaves for the gang;
* ``wait``: ``wait-for-tier: 2`` for an hour under a hard tier-3 limit (the session is
  given a clock, so the wider tier is held back while it waits).

Plain gangs are unchanged (``plain``). Claims live in the store's DRA state from the
gang's submission to its completion, as the live scheduler's feed keeps them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from typing import Any

from tierra.api.hypernode import HyperNode
from tierra.api.labels import LabelSelector
from tierra.api.node import Node
from tierra.api.pod import Pod, PodClaim
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm, SpreadConstraint
from tierra.api.podgroup import PodGroup
from tierra.api.resource import decode_device_class, decode_resource_claim, decode_resource_slice
from tierra.api.tierra_annotations import RANK_LABEL, SLICES
from tierra.kube.testing.dra import (
    GPU_CLASS_SELECTOR,
    GPU_DRIVER,
    claim_manifest,
    device_class_manifest,
    exact_request,
    gpu_device,
    resource_slice_manifest,
)
from tierra.scheduler import ClusterStore
from tierra.scheduler.constraints.bounded_wait import WAIT_FOR, WAIT_TIER
from tierra.scheduler.constraints.exclusive import EXCLUSIVE_TIER
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import node_with_devices, with_devices
from tierra.scheduler.testing import fat_tree, node, topology

FEATURES = ("plain", "dra", "rules", "kueue", "exclusive", "wait")
HOST = "kubernetes.io/hostname"
LEAF = "topology.tierra.dev/leaf"
GPU = "nvidia.com/gpu"

Gang = tuple[PodGroup, list[Pod]]


@dataclass(frozen=True, slots=True)
class Featured:
    """A cluster with the labels and the DRA pool the features read."""

    nodes: list[Node]
    hypernodes: list[HyperNode]
    classes: tuple[Any, ...]
    slices: tuple[Any, ...]
    pool: frozenset[str]  # the nodes whose GPUs are DRA devices

    def store(self) -> ClusterStore:
        """A fresh store over the cluster, its DRA state in the ``devices`` extension."""
        devices = DeviceCluster.of(self.classes, [], [], self.slices)
        store = ClusterStore(
            nodes=[node_with_devices(devices, n) for n in self.nodes], hypernodes=self.hypernodes
        )
        store.extensions[EXTENSION] = devices
        return store


def featured_cluster(n_nodes: int) -> Featured:
    plain, hns = fat_tree(n_nodes)
    leaf_of = {m: h.name for h in hns if h.tier == 1 for m in _members(h)}
    spines = sorted(h.name for h in hns if h.tier == 2)
    pool_spines = set(spines[-max(1, len(spines) // 10) :])
    pool_leaves = {c for h in hns if h.name in pool_spines for c in _members(h)}
    pool = frozenset(n.name for n in plain if leaf_of.get(n.name) in pool_leaves)
    nodes = [
        node(
            n.name,
            cpu=128,
            memory="2Ti",
            gpu=0 if n.name in pool else 8,
            labels={HOST: n.name, LEAF: leaf_of.get(n.name, "")},
        )
        for n in plain
    ]
    slices = []
    for name in sorted(pool):
        gpus = [gpu_device(k, f"pci0000:{k // 2:02x}") for k in range(8)]
        slices.append(
            decode_resource_slice(resource_slice_manifest(name, GPU_DRIVER, gpus), None, [])
        )
    klass = decode_device_class(device_class_manifest(GPU_DRIVER, GPU_CLASS_SELECTOR), None, [])
    return Featured(nodes, hns, (klass,), tuple(slices), pool)


def _members(h: HyperNode) -> list[str]:
    return [m.selector.exact for m in h.members if m.selector.exact]


def featured(gang: Gang, feature: str, store: ClusterStore) -> Gang:
    """``gang`` using ``feature`` (module docstring); its claims added to the store's DRA
    state when it has any."""
    pg, pods = gang
    if feature == "plain":
        return gang
    if feature == "dra":
        return pg, [_with_claim(p, store) for p in pods]
    app = pg.meta.name
    notes = dict(pg.meta.annotations)
    if feature == "rules":
        apart = PodAffinityTerm(HOST, LabelSelector({"app": app}))
        spread = SpreadConstraint(8, LEAF, "DoNotSchedule", LabelSelector({"app": app}))
        rules = PlacementRules(anti_affinity=(apart,), spread=(spread,))
        pods = [
            replace(p, meta=replace(p.meta, labels={**p.meta.labels, "app": app}), rules=rules)
            for p in pods
        ]
        return pg, pods
    if feature == "kueue":
        notes[SLICES] = json.dumps([{"tier": 1, "size": 16}])
        notes[RANK_LABEL] = "rank"
        pods = [
            replace(p, meta=replace(p.meta, labels={**p.meta.labels, "rank": str(i)}))
            for i, p in enumerate(pods)
        ]
    elif feature == "exclusive":
        notes[EXCLUSIVE_TIER] = "1"
    elif feature == "wait":
        notes[WAIT_TIER] = "2"
        notes[WAIT_FOR] = "1h"
        pg = replace(pg, network_topology=topology(tier=3))
    return replace(pg, meta=replace(pg.meta, annotations=notes)), pods


def _with_claim(p: Pod, store: ClusterStore) -> Pod:
    """``p`` asking its GPUs through a claim of its own instead of ``nvidia.com/gpu``."""
    devices = store.extensions[EXTENSION]
    assert isinstance(devices, DeviceCluster)
    count = max(1, p.requests.get(GPU, 0) // 1000)
    name = f"{p.name}-gpu"
    raw = claim_manifest(name, p.namespace, [exact_request("gpu", GPU_DRIVER, count)])
    claim = decode_resource_claim(raw, None, [])
    devices.claims[claim.key] = claim
    devices.changed()
    requests = {k: v for k, v in p.requests.items() if k != GPU}
    plain = replace(p, requests=requests, resource_claims=(PodClaim("gpu", name),))
    return with_devices(devices, plain)


def release(pods: list[Pod], store: ClusterStore) -> None:
    """Forget the claims of pods gone (the adapter's feed does on their deletion)."""
    devices = store.extensions.get(EXTENSION)
    if not isinstance(devices, DeviceCluster):
        return
    for p in pods:
        for c in p.resource_claims:
            key = f"{p.namespace}/{c.claim_name}"
            devices.claims.pop(key, None)
            devices.assumed.pop(key, None)
    devices.changed()


def draw_feature(rng: random.Random, size: int) -> str:
    """A feature for one gang of the mixed stream: a fifth of them each use one (a gang of
    one pod has no rules or slices to speak of: plain, or DRA)."""
    if rng.random() >= 0.4:
        return "plain"
    if size < 16:
        return rng.choice(["plain", "dra"])
    return rng.choice(FEATURES[1:])
