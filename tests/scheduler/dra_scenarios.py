"""One DRA scenario two test areas read: the scheduler's device reason and the dashboard's
row for the same pending gang must agree, so they build the very same cluster."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    NIC,
    claim,
    device_class,
    exactly,
    gpu,
    nic,
    slice_,
)

from tierra.api.pod import PodClaim
from tierra.api.snapshot import Snapshot
from tierra.scheduler import ClusterStore, run_session
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import device_snapshot
from tierra.scheduler.testing import gang, hypernode, node, snapshot, topology

ROOT = "resource.kubernetes.io/pcieRoot"
CLASSES = (device_class(GPU, GPU_CLASS_SELECTOR), device_class(NIC, f"device.driver == '{NIC}'"))


def pcie_pairs() -> Snapshot:
    """2 pods, each 4 claims of a GPU and a NIC under one PCIe root; node-5 has 3 such
    pairs, the others 2: nowhere fits."""
    pg, pods = gang("job", 2, network_topology=topology(tier=1))
    pods = [
        replace(p, resource_claims=tuple(PodClaim(f"pair{k}", f"c{i}-{k}") for k in range(4)))
        for i, p in enumerate(pods)
    ]
    same_root = [{"matchAttribute": ROOT}]
    claims = [
        claim(
            f"c{i}-{k}",
            exactly("g", GPU),
            exactly("n", NIC),
            constraints=same_root,
            namespace="default",
        )
        for i in range(2)
        for k in range(4)
    ]
    nodes = [node(f"node-{i}", gpu=0) for i in range(6)]
    racks = [
        hypernode(f"r{j + 1}", 1, nodes=[f"node-{2 * j}", f"node-{2 * j + 1}"]) for j in range(3)
    ]
    slices = []
    for i in range(6):
        aligned = 3 if i == 5 else 2
        gpus = [gpu(f"gpu-{k}", f"pci{k}") for k in range(8)]
        nics = [nic(f"nic-{k}", f"pci{k}" if k < aligned else f"pci-x{k}") for k in range(8)]
        slices += [
            slice_(f"g{i}", GPU, gpus, node=f"node-{i}"),
            slice_(f"n{i}", NIC, nics, node=f"node-{i}"),
        ]
    return replace(
        snapshot(nodes, racks, pods, [pg]),
        device_classes=CLASSES,
        resource_claims=tuple(claims),
        resource_slices=tuple(slices),
    )


def scheduled_reason(snap: Snapshot) -> str:
    """The reason ``tierra schedule`` gives the one gang of ``snap`` that waits."""
    seen, devices, _ = device_snapshot(snap, ("tierra",))
    store = ClusterStore.from_snapshot(seen)
    store.extensions[EXTENSION] = devices
    (waiting,) = run_session(store).unschedulable
    return waiting.reason
