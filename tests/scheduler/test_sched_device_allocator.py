"""The structured allocator, case by case after upstream's allocator tests.

Each test names the case of k8s.io/dynamic-resource-allocation/structured/internal/
allocatortesting/allocator_testing.go (v0.36.3) it follows; the devices carry the
attributes NVIDIA's GPU driver publishes. Tests named ``tierra_*`` are tierra's own.
"""

from __future__ import annotations

from pathlib import Path

from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    NIC,
    claim,
    classes,
    device_class,
    exactly,
    gpu,
    nic,
    slice_,
)

from tierra.api.labels import Operator, Requirement
from tierra.api.snapshot import load_snapshot
from tierra.scheduler.devices.allocator import DeviceAllocator
from tierra.scheduler.devices.pools import NodeInfo
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal

N1 = NodeInfo("n1", {"region": "r1"})
GPUS = classes(
    device_class(GPU, GPU_CLASS_SELECTOR), device_class(NIC, f"device.driver == '{NIC}'")
)
FIXTURE = (
    Path(__file__).parent.parent / "fixtures" / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
)


def devices(result: tuple[ClaimAllocation, ...] | DeviceRefusal) -> list[list[tuple[str, str]]]:
    assert not isinstance(result, DeviceRefusal), str(result)
    return [[(r.request, r.device) for r in a.allocation.results] for a in result]


def refused(result: tuple[ClaimAllocation, ...] | DeviceRefusal) -> DeviceRefusal:
    assert isinstance(result, DeviceRefusal), result
    return result


def two_gpus(**extra: object) -> list:
    return [slice_("s1", GPU, [gpu("gpu-0", "pci0000:10", **extra), gpu("gpu-1", "pci0000:20")])]


def test_simple() -> None:
    alloc = DeviceAllocator(GPUS, two_gpus())
    result = alloc.allocate([claim("c", exactly("req-0", GPU))], N1, set())
    assert devices(result) == [[("req-0", "gpu-0")]]
    (a,) = result  # type: ignore[misc]
    term = a.allocation.node_selector[0]
    assert term.match_fields == (Requirement("metadata.name", Operator.IN, ("n1",)),)


def test_other_node() -> None:
    alloc = DeviceAllocator(GPUS, two_gpus())
    result = alloc.allocate([claim("c", exactly("req-0", GPU))], NodeInfo("n2"), set())
    assert "0 of 1 devices of class gpu.nvidia.com free on node n2" in str(refused(result))


def test_small_and_large_backtrack_requests() -> None:
    slices = [slice_("s1", GPU, [gpu("large", "r1", "2Gi"), gpu("small", "r2", "1Gi")])]
    mem = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{}")) >= 0'
    c = claim(
        "c", exactly("small", GPU, 1, mem.format("1Gi")), exactly("big", GPU, 1, mem.format("2Gi"))
    )
    assert devices(DeviceAllocator(GPUS, slices).allocate([c], N1, set())) == [
        [("small", "small"), ("big", "large")]
    ]


def test_small_and_large_backtrack_claims() -> None:
    slices = [slice_("s1", GPU, [gpu("large", "r1", "2Gi"), gpu("small", "r2", "1Gi")])]
    mem = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{}")) >= 0'
    c0 = claim("c0", exactly("r", GPU, 1, mem.format("1Gi")))
    c1 = claim("c1", exactly("r", GPU, 1, mem.format("2Gi")))
    assert devices(DeviceAllocator(GPUS, slices).allocate([c0, c1], N1, set())) == [
        [("r", "small")],
        [("r", "large")],
    ]


def test_devices_split_across_different_slices() -> None:
    slices = [
        slice_("s1", GPU, [gpu("gpu-0", "r1")], pool="p", count=2),
        slice_("s2", GPU, [gpu("gpu-1", "r2")], pool="p", count=2),
    ]
    result = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU, 2))], N1, set())
    assert devices(result) == [[("r", "gpu-0"), ("r", "gpu-1")]]


def test_obsolete_slice() -> None:
    slices = [
        slice_("old", GPU, [gpu("gpu-old", "r1")], pool="p", generation=1),
        slice_("new", GPU, [gpu("gpu-new", "r1")], pool="p", generation=2),
    ]
    result = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU))], N1, set())
    assert devices(result) == [[("r", "gpu-new")]]


def test_duplicate_slice() -> None:
    slices = [
        slice_("s1", GPU, [gpu("gpu-0", "r1")], pool="p", count=2),
        slice_("s2", GPU, [gpu("gpu-0", "r1")], pool="p", count=2),
    ]
    result = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU))], N1, set())
    refused(result)


def test_not_enough_suitable_devices() -> None:
    result = DeviceAllocator(GPUS, two_gpus()).allocate(
        [claim("c", exactly("r", GPU, 3))], N1, set()
    )
    assert "2 of 3 devices" in refused(result).reason


def test_unknown_class() -> None:
    r = refused(
        DeviceAllocator(GPUS, two_gpus()).allocate([claim("c", exactly("r", "nope"))], N1, set())
    )
    assert (r.claim, r.request, r.path) == (
        "ResourceClaim/ns/c",
        "r",
        "spec.devices.requests[0].exactly.deviceClassName",
    )
    assert "device class nope does not exist" in r.reason


def test_all_devices_single_and_some_allocated() -> None:
    alloc = DeviceAllocator(GPUS, two_gpus())
    c = claim("c", exactly("r", GPU, allocationMode="All"))
    assert devices(alloc.allocate([c], N1, set())) == [[("r", "gpu-0"), ("r", "gpu-1")]]
    refused(alloc.allocate([c], N1, {(GPU, "n1", "gpu-0")}))  # all-devices-some-allocated


def test_all_devices_some_allocated_admin_access() -> None:
    c = claim("c", exactly("r", GPU, allocationMode="All", adminAccess=True))
    result = DeviceAllocator(GPUS, two_gpus()).allocate([c], N1, {(GPU, "n1", "gpu-0")})
    assert devices(result) == [[("r", "gpu-0"), ("r", "gpu-1")]]
    assert all(r.admin_access for r in result[0].allocation.results)  # type: ignore[index]


def test_all_devices_of_the_incomplete_pool() -> None:
    slices = [slice_("s1", GPU, [gpu("gpu-0", "r1")], pool="p", count=2)]
    r = refused(
        DeviceAllocator(GPUS, slices).allocate(
            [claim("c", exactly("r", GPU, allocationMode="All"))], N1, set()
        )
    )
    assert "currently being updated" in r.reason


def test_already_allocated_devices() -> None:
    result = DeviceAllocator(GPUS, two_gpus()).allocate(
        [claim("c", exactly("r", GPU))], N1, {(GPU, "n1", "gpu-0")}
    )
    assert devices(result) == [[("r", "gpu-1")]]


def test_with_constraint() -> None:
    slices = [
        slice_("g", GPU, [gpu("gpu-0", "pci0000:10"), gpu("gpu-1", "pci0000:20")]),
        slice_("n", NIC, [nic("nic-0", "pci0000:20")]),
    ]
    c = claim(
        "c",
        exactly("gpu", GPU),
        exactly("nic", NIC),
        constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    )
    assert devices(DeviceAllocator(GPUS, slices).allocate([c], N1, set())) == [
        [("gpu", "gpu-1"), ("nic", "nic-0")]
    ]


def test_with_constraint_non_existent_attribute() -> None:
    c = claim(
        "c",
        exactly("r", GPU, 2),
        constraints=[{"matchAttribute": "gpu.nvidia.com/noSuchAttribute"}],
    )
    assert (
        "matchAttribute"
        in refused(DeviceAllocator(GPUS, two_gpus()).allocate([c], N1, set())).reason
    )


def test_with_constraint_not_matching_string_attribute() -> None:
    c = claim(
        "c",
        exactly("r", GPU, 2),
        constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    )
    refused(DeviceAllocator(GPUS, two_gpus()).allocate([c], N1, set()))


def test_with_constraint_for_request() -> None:
    # The constraint names only "a": "b" may take a device on another root.
    slices = [slice_("s", GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y"), gpu("gpu-2", "x")])]
    c = claim(
        "c",
        exactly("a", GPU, 2),
        exactly("b", GPU),
        constraints=[{"requests": ["a"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    )
    assert devices(DeviceAllocator(GPUS, slices).allocate([c], N1, set())) == [
        [("a", "gpu-0"), ("a", "gpu-2"), ("b", "gpu-1")]
    ]


def test_with_class_device_config_and_claim_with_device_config() -> None:
    opaque = {"opaque": {"driver": GPU, "parameters": {"sharing": "TimeSlicing"}}}
    cls = classes(device_class(GPU, GPU_CLASS_SELECTOR, config=[opaque]))
    c = claim("c", exactly("r", GPU), config=[{"requests": ["r"], **opaque}])
    (a,) = DeviceAllocator(cls, two_gpus()).allocate([c], N1, set())  # type: ignore[misc]
    assert [(x.source, x.config.requests) for x in a.allocation.config] == [
        ("FromClass", ("r",)),
        ("FromClaim", ("r",)),
    ]


def test_invalid_cel_one_device_class() -> None:
    cls = classes(device_class(GPU, "device.driver =="))
    r = refused(
        DeviceAllocator(cls, two_gpus()).allocate([claim("c", exactly("r", GPU))], N1, set())
    )
    assert (r.obj, r.path) == ("DeviceClass/gpu.nvidia.com", "spec.selectors[0].cel.expression")
    assert "CEL compile error" in r.reason


def test_invalid_cel_one_device() -> None:
    c = claim("c", exactly("r", GPU, 1, "device.attributes['gpu.nvidia.com'].nope == 1"))
    r = refused(DeviceAllocator(GPUS, two_gpus()).allocate([c], N1, set()))
    assert (r.obj, r.path) == (
        "ResourceClaim/ns/c",
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
    )
    assert "CEL runtime error" in r.reason


def test_too_many_devices_single_request() -> None:
    r = refused(
        DeviceAllocator(GPUS, two_gpus()).allocate([claim("c", exactly("r", GPU, 33))], N1, set())
    )
    assert "exceeds the claim limit of 32" in r.reason


def test_prioritized_list_first_unavailable() -> None:
    c = claim(
        "c",
        {
            "name": "r",
            "firstAvailable": [
                {"name": "four", "deviceClassName": GPU, "count": 4},
                {"name": "two", "deviceClassName": GPU, "count": 2},
            ],
        },
    )
    result = DeviceAllocator(GPUS, two_gpus()).allocate([c], N1, set())
    assert devices(result) == [[("r/two", "gpu-0"), ("r/two", "gpu-1")]]


def test_tainted_two_devices_and_tolerated_and_no_effect() -> None:
    taint = {"key": "health", "value": "bad", "effect": "NoSchedule"}
    slices = [
        slice_(
            "s",
            GPU,
            [
                gpu("gpu-0", "x", taints=[taint]),
                gpu("gpu-1", "y", taints=[{**taint, "effect": "NoExecute"}]),
            ],
        )
    ]
    alloc = DeviceAllocator(GPUS, slices)
    refused(alloc.allocate([claim("c", exactly("r", GPU))], N1, set()))
    tolerant = exactly("r", GPU, tolerations=[{"key": "health", "operator": "Exists"}])
    assert devices(alloc.allocate([claim("c", tolerant)], N1, set())) == [[("r", "gpu-0")]]
    informational = [slice_("s", GPU, [gpu("gpu-0", "x", taints=[{**taint, "effect": "None"}])])]
    assert devices(
        DeviceAllocator(GPUS, informational).allocate([claim("c", exactly("r", GPU))], N1, set())
    ) == [[("r", "gpu-0")]]


def test_network_attached_device() -> None:
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["r1"]}]}
        ]
    }
    slices = [
        slice_("s", GPU, [gpu("gpu-0", "x")], node=None, pool="fabric", nodeSelector=selector)
    ]
    (a,) = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU))], N1, set())  # type: ignore[misc]
    assert a.allocation.node_selector[0].match_expressions == (
        Requirement("region", Operator.IN, ("r1",)),
    )
    refused(
        DeviceAllocator(GPUS, slices).allocate(
            [claim("c", exactly("r", GPU))], NodeInfo("n2", {"region": "r2"}), set()
        )
    )


def _selecting(key: str, value: str) -> dict[str, object]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
        ]
    }


def test_unsuccessful_allocation_network_attached_device() -> None:
    slices = [
        slice_(
            "s",
            GPU,
            [gpu("gpu-0", "x")],
            node=None,
            pool="p",
            nodeSelector=_selecting("region", "r1"),
        )
    ]
    result = DeviceAllocator(GPUS, slices).allocate(
        [claim("c", exactly("r", GPU))], NodeInfo("n2", {"region": "r2"}), set()
    )
    assert refused(result).reason == "0 of 1 devices of class gpu.nvidia.com free on node n2"


def test_many_network_attached_devices() -> None:
    local_field = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    slices = [
        slice_(
            "s1",
            GPU,
            [gpu("gpu-0", "a")],
            node=None,
            pool="p1",
            nodeSelector=_selecting("region", "r1"),
        ),
        slice_("s2", GPU, [gpu("gpu-0", "b")], node=None, pool="p2", allNodes=True),
        slice_(
            "s3",
            GPU,
            [gpu("gpu-0", "c")],
            node=None,
            pool="p3",
            nodeSelector=_selecting("planet", "earth"),
        ),
        slice_("s4", GPU, [gpu("gpu-0", "d")], node=None, pool="p4", nodeSelector=local_field),
    ]
    n1 = NodeInfo("n1", {"region": "r1", "planet": "earth"})
    (a,) = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU, 4))], n1, set())  # type: ignore[misc]
    assert [(r.pool, r.device) for r in a.allocation.results] == [
        ("p1", "gpu-0"),
        ("p2", "gpu-0"),
        ("p3", "gpu-0"),
        ("p4", "gpu-0"),
    ]
    (term,) = a.allocation.node_selector  # a union of the slices' selectors, one term
    assert term.match_expressions == (
        Requirement("region", Operator.IN, ("r1",)),
        Requirement("planet", Operator.IN, ("earth",)),
    )
    assert term.match_fields == (Requirement("metadata.name", Operator.IN, ("n1",)),)


def test_local_and_network_attached_devices() -> None:
    slices = [
        slice_(
            "s1",
            GPU,
            [gpu("gpu-0", "a")],
            node=None,
            pool="p1",
            nodeSelector=_selecting("region", "r1"),
        ),
        slice_("s2", GPU, [gpu("gpu-0", "b")], node="n1", pool="p2"),
    ]
    (a,) = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU, 2))], N1, set())  # type: ignore[misc]
    assert [(r.pool, r.device) for r in a.allocation.results] == [("p1", "gpu-0"), ("p2", "gpu-0")]
    (term,) = a.allocation.node_selector  # any node-local device: that node
    assert term.match_fields == (Requirement("metadata.name", Operator.IN, ("n1",)),)
    assert not term.match_expressions


def test_tierra_all_nodes_devices_leave_the_claim_unpinned() -> None:
    slices = [slice_("s", GPU, [gpu("gpu-0", "x")], node=None, pool="fabric", allNodes=True)]
    (a,) = DeviceAllocator(GPUS, slices).allocate([claim("c", exactly("r", GPU))], N1, set())  # type: ignore[misc]
    assert a.allocation.node_selector is None


def test_separate_claims_share_device_admin_access() -> None:
    slices = [slice_("s", GPU, [gpu("gpu-0", "x")])]
    admin = exactly("r", GPU, adminAccess=True)
    result = DeviceAllocator(GPUS, slices).allocate(
        [claim("a", admin), claim("b", admin)], N1, set()
    )
    assert devices(result) == [[("r", "gpu-0")], [("r", "gpu-0")]]


def test_tierra_unsupported_fields_are_refused_by_name() -> None:
    alloc = DeviceAllocator(GPUS, two_gpus())
    distinct = claim(
        "c", exactly("r", GPU, 2), constraints=[{"distinctAttribute": "gpu.nvidia.com/uuid"}]
    )
    r = refused(alloc.allocate([distinct], N1, set()))
    assert r.unsupported and r.path == "spec.devices.constraints[0].distinctAttribute"
    capacity = claim("c", exactly("r", GPU, capacity={"requests": {"memory": "10Gi"}}))
    r = refused(alloc.allocate([capacity], N1, set()))
    assert r.unsupported and r.path == "spec.devices.requests[0].exactly.capacity"
    counters = [
        slice_(
            "s", GPU, [gpu("gpu-0", "x", consumesCounters=[{"counterSet": "a", "counters": {}}])]
        )
    ]
    assert (
        "left out"
        in refused(
            DeviceAllocator(GPUS, counters).allocate([claim("c", exactly("r", GPU))], N1, set())
        ).reason
    )


def test_tierra_gpus_and_nics_share_pcie_roots_without_a_constraint() -> None:
    # Upstream takes gpu-0 and nic-0 (pool order) on different roots; tierra aligns them.
    slices = [
        slice_("g", GPU, [gpu(f"gpu-{i}", f"pci0000:{i}") for i in range(4)]),
        slice_("n", NIC, [nic(f"nic-{i}", f"pci0000:{3 - i}") for i in range(4)]),
    ]
    c = claim("c", exactly("gpu", GPU, 2), exactly("nic", NIC, 2))
    alloc = DeviceAllocator(GPUS, slices)
    in_use = {(NIC, "n1", "nic-3")}  # the NIC under pci0000:0 is taken
    got = devices(alloc.allocate([c], N1, in_use))
    assert got == [[("gpu", "gpu-1"), ("gpu", "gpu-2"), ("nic", "nic-1"), ("nic", "nic-2")]]
    assert got == devices(DeviceAllocator(GPUS, slices).allocate([c], N1, in_use))  # deterministic


def test_tierra_the_h100_capture_gives_eight_gpus_and_no_ninth() -> None:
    snap = load_snapshot([FIXTURE])
    alloc = DeviceAllocator(GPUS, snap.resource_slices)
    node = NodeInfo("gpu-node-1")
    eight = alloc.allocate([claim("c", exactly("r", GPU, 8))], node, set())
    assert len(devices(eight)[0]) == 8
    taken = {r.device_id for r in eight[0].allocation.results}  # type: ignore[index]
    assert (
        "0 of 1 devices"
        in refused(alloc.allocate([claim("d", exactly("r", GPU))], node, taken)).reason
    )


def test_tierra_nvidia_smi_aligns_gpus_and_nics_the_slices_say_nothing_about() -> None:
    """A DGX-1 whose slices carry no PCIe attributes (an older driver) and whose Node
    carries discovery's nvidia-smi annotation: the node's inside (topology/inside.py)
    puts GPU0 and mlx5_0 under one PCIe switch, so a GPU+NIC claim gets that NIC, not the
    first one listed (mlx5_3, across the sockets)."""
    from tierra.api.meta import ObjectMeta
    from tierra.api.node import Node
    from tierra.api.node_topology import NODE_TOPOLOGY_ANNOTATION
    from tierra.discovery.nvidia_smi import parse
    from tierra.scheduler.devices.cluster import DeviceCluster

    text = (
        Path(__file__).parent.parent
        / "fixtures"
        / "gpu-topo"
        / "nvidia-smi-topo-dgx1-v100-4nic.txt"
    ).read_text()
    gpus = slice_(
        "g",
        GPU,
        [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(8)],
        node="dgx1",
    )
    nics = slice_(
        "n",
        NIC,
        [
            {"name": f"nic-{i}", "attributes": {"rdmaDevice": {"string": f"mlx5_{3 - i}"}}}
            for i in range(4)
        ],
        node="dgx1",
    )
    c = claim("c", exactly("g", GPU), exactly("n", NIC))
    plain = DeviceCluster.of(GPUS.values(), [c], [], [gpus, nics])
    node = NodeInfo("dgx1")
    assert devices(plain.allocator.allocate([c], node, set())) == [[("g", "gpu-0"), ("n", "nic-0")]]
    annotated = Node(
        meta=ObjectMeta(
            name="dgx1", annotations={NODE_TOPOLOGY_ANNOTATION: parse(text, "dgx1").to_json()}
        )
    )
    plain.note_node(annotated)
    assert devices(plain.allocator.allocate([c], node, set())) == [[("g", "gpu-0"), ("n", "nic-3")]]
