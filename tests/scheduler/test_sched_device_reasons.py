"""Why a pod's devices cannot be found, in words a person can act on: the node that came
closest and how close ("node-5 comes closest: 3 of the pod's 4 claims"), which GPU/NIC
pairing under one PCIe root failed there, and never "can never fit" for a pod kept out
only by devices other pods hold now."""

from __future__ import annotations

from dataclasses import replace
from unittest.mock import patch

from tests.scheduler.dra_builders import (
    GPU,
    NIC,
    claim,
    exactly,
    gpu,
    slice_,
)
from tests.scheduler.dra_scenarios import CLASSES, ROOT, pcie_pairs, scheduled_reason

from tierra.api.pod import PodClaim
from tierra.api.resource import Allocation, DeviceResult
from tierra.scheduler.testing import gang, hypernode, node, snapshot, topology


def test_the_closest_node_and_the_pairing_that_failed_there_are_named() -> None:
    # Each pod: 4 claims of one GPU and one NIC under one PCIe root. Every node has 8 of
    # each, but only 2 (node-5: 3) NICs share a GPU's root.
    reason = scheduled_reason(pcie_pairs())
    assert "node-5 comes closest: 3 of the pod's 4 claims" in reason, reason
    assert (
        f"ResourceClaim/default/c0-3: matchAttribute {ROOT}: no value on node node-5 has 1 {GPU}"
        f" device and 1 {NIC} device free (the most: pci3, 1 {GPU} device)" in reason
    ), reason
    assert "short of cpu" not in reason and "shrink" not in reason, reason


def test_devices_held_by_others_now_are_not_never() -> None:
    pg, pods = gang("job", 1, network_topology=topology(tier=1))
    pods = [replace(pods[0], resource_claims=(PodClaim("g", "want"),))]
    held = Allocation(
        results=tuple(
            DeviceResult(request="g", driver=GPU, pool="n1", device=f"gpu-{k}") for k in range(4)
        )
    )
    claims = (
        claim("want", exactly("g", GPU, 2), namespace="default"),
        replace(claim("held", exactly("g", GPU, 4), namespace="default"), allocation=held),
    )
    snap = replace(
        snapshot([node("n1", gpu=0)], [hypernode("r1", 1, nodes=["n1"])], pods, [pg]),
        device_classes=CLASSES,
        resource_claims=claims,
        resource_slices=(slice_("s", GPU, [gpu(f"gpu-{k}", "x") for k in range(5)], node="n1"),),
    )
    reason = scheduled_reason(snap)
    assert "never" not in reason, reason
    assert f"1 of 2 devices of class {GPU} free on node n1 (n1 comes closest)" in reason, reason
    assert "short of cpu" not in reason, reason


def test_pods_with_equal_claims_share_the_reason_each_naming_its_own_claim() -> None:
    """Two lone pods, one claim each of 4 GPUs, where nodes have 2: the reason is worked
    out once and told to each with its own claim's name."""
    from tierra.scheduler.devices.cluster import DeviceCluster

    pods = []
    pgs = []
    for i in range(2):
        pg, (p,) = gang(f"lone{i}", 1)
        pods.append(replace(p, resource_claims=(PodClaim("g", f"four-{i}"),)))
        pgs.append(pg)
    snap = replace(
        snapshot([node("n1", gpu=0)], [hypernode("r1", 1, nodes=["n1"])], pods, pgs),
        device_classes=CLASSES,
        resource_claims=tuple(
            claim(f"four-{i}", exactly("g", GPU, 4), namespace="default") for i in range(2)
        ),
        resource_slices=(slice_("s", GPU, [gpu(f"gpu-{k}", "x") for k in range(2)], node="n1"),),
    )
    devices = DeviceCluster.of(snap.device_classes, snap.resource_claims, [], snap.resource_slices)
    nodes = list(snap.nodes)
    with patch.object(DeviceCluster, "plan", autospec=True, side_effect=DeviceCluster.plan) as plan:
        first = devices.eligible(pods[0], nodes)[1]
        searched = plan.call_count
        second = devices.eligible(pods[1], nodes)[1]
    assert searched and plan.call_count == searched  # not searched again
    assert first is not None and second is not None
    assert first.claim == "ResourceClaim/default/four-0"
    assert second.claim == "ResourceClaim/default/four-1"
    assert second.reason == first.reason
