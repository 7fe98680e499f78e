"""Eligibility counted over the device matrix says what the full search says, node by
node, for overlapping selectors, constraints, devices in use and devices that are short;
a slice update keeps the verdicts of the devices it left as they were."""

from __future__ import annotations

import random

import numpy as np
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

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import Pod, PodClaim
from tierra.api.resource import Allocation, DeviceResult
from tierra.scheduler.devices.cluster import DeviceCluster

ROOTS = ("pci0", "pci1", "pci2")


def _cluster(rng: random.Random, n: int) -> DeviceCluster:
    slices = []
    for i in range(n):
        g = [
            gpu(f"gpu-{k}", rng.choice(ROOTS), memory=rng.choice(["40Gi", "80Gi"]))
            for k in range(rng.randint(0, 5))
        ]
        k = [nic(f"nic-{j}", rng.choice(ROOTS)) for j in range(rng.randint(0, 4))]
        slices.append(slice_(f"g{i}", GPU, g, node=f"n{i}"))
        slices.append(slice_(f"k{i}", NIC, k, node=f"n{i}"))
    classes = [
        device_class(GPU, GPU_CLASS_SELECTOR),
        device_class(NIC, f"device.driver == '{NIC}'"),
    ]
    return DeviceCluster.of(classes, [], [], slices)


CLAIMS = [
    [exactly("g", GPU, 2)],
    [exactly("g", GPU, 2), exactly("k", NIC, 2)],
    [
        exactly("g", GPU, 1),
        exactly(
            "h", GPU, 2, "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) > 0"
        ),
    ],
    [exactly("g", GPU, 3), exactly("h", GPU, 1)],
]


def test_counts_agree_with_the_search_on_every_node() -> None:
    rng = random.Random(7)
    for trial in range(12):
        dc = _cluster(rng, 12)
        nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(13)]
        requests = CLAIMS[trial % len(CLAIMS)]
        extra = {}
        if trial % 3 == 1:
            extra["constraints"] = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
        dc.claims["ns/c"] = claim("c", *requests, **extra)
        if trial % 2:
            used = DeviceResult(request="g", driver=GPU, pool="n1", device="gpu-0")
            dc.assumed["ns/other"] = Allocation(results=(used,))
        dc.changed()
        p = Pod(
            meta=ObjectMeta(name="p", namespace="ns", uid="u"),
            resource_claims=(PodClaim("x", "c"),),
        )
        counted = dc.eligible(p, nodes)
        searched = dc._eligible_searched(p, nodes)
        # the same nodes; where none, a reason each (which node is closest may differ:
        # the counts order the nodes searched for it)
        assert counted[0] == searched[0], (trial, counted, searched)
        assert (counted[1] is None) == (searched[1] is None), (trial, counted, searched)


def test_a_slice_update_keeps_the_verdicts_of_unchanged_devices() -> None:
    dc = _cluster(random.Random(3), 4)
    dc.claims["ns/c"] = claim("c", exactly("g", GPU, 1))
    nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(4)]
    p = Pod(
        meta=ObjectMeta(name="p", namespace="ns", uid="u"), resource_claims=(PodClaim("x", "c"),)
    )
    dc.eligible(p, nodes)
    before = len(dc.allocator._matches)
    assert before
    dc.slices["g0"] = slice_("g0", GPU, [gpu("gpu-9", "pci0")], node="n0")
    dc.changed(devices=True)
    kept = len(dc.allocator._matches)
    assert 0 < kept < before  # n0's old GPUs' verdicts dropped, the others' kept
    names, _ = dc.eligible(p, nodes)
    assert "n0" in names


def _shared_slices(rng: random.Random, racks: int, *, incomplete: bool) -> list:
    """Per rack, a fabric pool of GPUs every node of the rack sees (a nodeSelector on its
    label), sometimes split over two slices; one pool every node sees (allNodes).
    ``incomplete``: rack 0's pool says it has one slice more than it publishes."""
    out = []
    for r in range(racks):
        selector = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "In", "values": [f"r{r}"]}]}
            ]
        }
        count = rng.randint(1, 2)
        for part in range(count):
            devices = [gpu(f"gpu-{part}-{k}", rng.choice(ROOTS)) for k in range(rng.randint(0, 3))]
            out.append(
                slice_(
                    f"fabric-{r}-{part}",
                    GPU,
                    devices,
                    node=None,
                    pool=f"fabric-{r}",
                    count=count + int(incomplete and r == 0),
                    nodeSelector=selector,
                )
            )
    out.append(
        slice_("everywhere", NIC, [nic("nic-x", "pci0")], node=None, pool="all", allNodes=True)
    )
    return out


def test_counts_agree_with_the_search_where_slices_select_their_nodes() -> None:
    """upstream's network-attached cases, counted: devices of slices with a nodeSelector or
    allNodes are counted on every node they reach, once per group of nodes."""
    rng = random.Random(11)
    for trial in range(12):
        dc = _cluster(rng, 8)
        for s in _shared_slices(rng, 3, incomplete=trial % 4 == 3):
            dc.slices[s.meta.name] = s
        nodes = [
            Node(meta=ObjectMeta(name=f"n{i}", labels={"rack": f"r{i % 3}"})) for i in range(9)
        ]
        requests = CLAIMS[trial % len(CLAIMS)]
        if trial % 2:
            requests = [*requests, exactly("k", NIC, 1)]
        dc.claims["ns/c"] = claim("c", *requests)
        if trial % 3 == 2:
            used = DeviceResult(request="g", driver=GPU, pool="fabric-1", device="gpu-0-0")
            dc.assumed["ns/other"] = Allocation(results=(used,))
        dc.changed(devices=True)
        p = Pod(
            meta=ObjectMeta(name="p", namespace="ns", uid="u"),
            resource_claims=(PodClaim("x", "c"),),
        )
        matrix = dc.allocator.matrix(nodes)
        assert matrix.reach is not None and len(matrix.nodes) == 9
        counted = dc.eligible(p, nodes)
        searched = dc._eligible_searched(p, nodes)
        # the same nodes; where none, a reason each (which node is closest may differ:
        # the counts order the nodes searched for it)
        assert counted[0] == searched[0], (trial, counted, searched)
        assert (counted[1] is None) == (searched[1] is None), (trial, counted, searched)


def test_a_shared_pool_is_one_set_of_devices_however_many_nodes_see_it() -> None:
    dc = DeviceCluster.of(
        [device_class(GPU, GPU_CLASS_SELECTOR)],
        [],
        [],
        [
            slice_(
                "all",
                GPU,
                [gpu("gpu-0", "x"), gpu("gpu-1", "y")],
                node=None,
                pool="f",
                allNodes=True,
            )
        ],
    )
    nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(50)]
    matrix = dc.allocator.matrix(nodes)
    assert len(matrix.candidates) == 2
    ok = np.ones(2, dtype=bool)
    assert matrix.room(ok).tolist() == [2] * 50
    ok[0] = False
    assert matrix.room(ok).tolist() == [1] * 50


def test_free_devices_kept_through_the_ledger_journal_match_a_recount() -> None:
    rng = random.Random(11)
    dc = _cluster(rng, 8)
    nodes = [Node(meta=ObjectMeta(name=f"n{i}")) for i in range(8)]
    matrix = dc.allocator.matrix(nodes)
    gpus = [c.id for c in matrix.candidates if c.id[0] == GPU]
    for step in range(60):
        key = f"ns/c{rng.randrange(6)}"
        if rng.random() < 0.3:
            dc.assumed.pop(key, None)
        else:
            held = rng.sample(gpus, rng.randint(1, 3))
            results = tuple(
                DeviceResult(request="g", driver=d, pool=p, device=n) for d, p, n in held
            )
            dc.assumed[key] = Allocation(results=results)
        dc.changed()
        dc.in_use()  # up to date before a view is taken, as eligible_unlocked does
        reader = dc.view() if step % 3 else dc  # a session's view reads the same journal
        in_use = reader.in_use()
        got = matrix.free(in_use, reader._journal())
        want = np.array([c.id not in in_use for c in matrix.candidates])
        assert np.array_equal(got, want), step
    assert matrix._free is not None  # kept, not recounted, along the way
