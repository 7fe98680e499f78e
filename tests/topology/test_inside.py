"""A node's inside, one model for both sources: DRA ResourceSlice attributes and the
nvidia-smi annotation discovery writes, joined device by device; what the allocator, tree
and dashboard read."""

from __future__ import annotations

from pathlib import Path

from tests.scheduler.dra_builders import GPU, NIC, gpu, nic, slice_

from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.node_topology import NODE_TOPOLOGY_ANNOTATION
from tierra.discovery.nvidia_smi import parse
from tierra.topology.inside import LEVELS, InsideIndex, from_devices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu-topo"
DGX1 = (FIXTURES / "nvidia-smi-topo-dgx1-v100-4nic.txt").read_text()


def _node(name: str, text: str | None = None) -> Node:
    annotations = {} if text is None else {NODE_TOPOLOGY_ANNOTATION: parse(text, name).to_json()}
    return Node(meta=ObjectMeta(name=name, annotations=annotations))


def test_dra_attributes_give_pcie_roots_numa_nodes_and_the_clique() -> None:
    root = "resource.kubernetes.io/pcieRoot"
    inside = from_devices(
        "n1",
        [
            (GPU, "n1", "gpu-0", {root: "pci0", "numaNode": 0}),
            (GPU, "n1", "gpu-1", {root: "pci1", "cliqueID": "c.7"}),
            (NIC, "n1", "nic-0", {root: "pci0", "dra.net/numaNode": 0}),
            ("compute-domain.nvidia.com", "n1", "channel-0", {}),  # not hardware
        ],
    )
    assert [(d.level, d.name, [k[2] for k in d.devices]) for d in inside.domains] == [
        ("pcie-root", "pci0", ["nic-0", "gpu-0"]),  # devices by driver, then name
        ("pcie-root", "pci1", ["gpu-1"]),
        ("numa", "numa0", ["nic-0", "gpu-0"]),
    ]
    assert inside.clique == "c.7"
    assert len(inside.devices) == 3
    assert inside.where((GPU, "n1", "gpu-0")) == {"pcie-root": ("pci0",), "numa": ("numa0",)}


def test_nvidia_smi_joins_dra_devices_by_gpu_index_and_nic_alias() -> None:
    """DGX-1: slices without PCIe attributes (an older driver) and the annotation. GPUi is
    gpu-i; a NIC whose attribute names mlx5_0 is mlx5_0; its switches and host bridges,
    and the NVLink island, land on the DRA devices."""
    gpus = slice_("g", GPU, [{"name": f"gpu-{i}", "attributes": {}} for i in range(8)], node="dgx1")
    nics = slice_(
        "n",
        NIC,
        [
            {"name": f"nic-{i}", "attributes": {"rdmaDevice": {"string": f"mlx5_{3 - i}"}}}
            for i in range(4)
        ],
        node="dgx1",
    )
    index = InsideIndex([gpus, nics], [_node("dgx1", DGX1)])
    inside = index.node("dgx1")
    switch = next(d for d in inside.domains if d.level == "pcie-switch")
    assert [k[2] for k in switch.devices] == ["gpu-0", "gpu-1", "nic-3"]  # GPU0, GPU1, mlx5_0
    assert switch.source == "nvidia-smi" and switch.link == "PIX"
    assert {d.level for d in inside.domains} >= {"nvlink", "pcie-switch", "host-bridge"}
    assert all(k[0] in (GPU, NIC) for d in inside.domains for k in d.devices)  # all joined
    levels = [LEVELS.index(d.level) for d in inside.domains]
    assert levels == sorted(levels)  # fastest first


def test_the_slices_word_wins_where_both_say_a_level() -> None:
    """A node whose GPUs carry a NUMA attribute and whose annotation says otherwise:
    the attribute (the driver's current word) decides."""
    text = (FIXTURES / "nvidia-smi-topo-4x-rtx6000ada-pcie-4nic-legend.txt").read_text()
    devices = [gpu(f"gpu-{i}", f"pci{i}") for i in range(4)]
    for d in devices:
        d["attributes"]["numaNode"] = {"int": 7}
    gpus = slice_("g", GPU, devices, node="ws")
    inside = InsideIndex([gpus], [_node("ws", text)]).node("ws")
    numa = [d for d in inside.domains if d.level == "numa"]
    assert [(d.name, d.source) for d in numa if any(k[0] == GPU for k in d.devices)] == [
        ("numa7", "dra")
    ]


def test_its_document_names_devices_by_driver_and_name() -> None:
    gpus = slice_("g", GPU, [gpu("gpu-0", "pci0"), gpu("gpu-1", "pci0")], node="n1")
    nics = slice_("n", NIC, [nic("nic-0", "pci0")], node="n1")
    plain = InsideIndex([gpus, nics]).node("n1")
    (domain,) = plain.to_dict()["domains"]
    assert domain == {
        "level": "pcie-root",
        "name": "pci0",
        "source": "dra",
        "devices": [f"{NIC}/nic-0", f"{GPU}/gpu-0", f"{GPU}/gpu-1"],
    }
