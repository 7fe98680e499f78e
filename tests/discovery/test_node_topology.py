"""Inside the node: nvidia-smi topo -m and DRA ResourceSlices -> NodeTopology."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from disc_helpers import DATA, nodes_of

from tierra.api.snapshot import read_documents
from tierra.discovery import ParseError
from tierra.discovery.dra import DraDevice, ResourceSlice, discover_dra, slices_from_documents
from tierra.discovery.nodetopology import NODE_TOPOLOGY_ANNOTATION, decode_node_topology, node_patch
from tierra.discovery.nvidia_smi import discover_nvidia_smi, parse
from tierra.errors import InputError


def smi(fixtures: Path, name: str) -> Path:
    return fixtures / "gpu-topo" / f"nvidia-smi-topo-{name}.txt"


def domains(topo: object) -> list[tuple[str, tuple[str, ...], str | None, bool]]:
    return [(d.kind, d.devices, d.link, d.complete) for d in topo.domains]  # type: ignore[attr-defined]


def test_dgx1_hybrid_cube_mesh(fixtures: Path) -> None:
    """DGX-1 V100: GPU pairs are NV1/NV2 or SYS (the hybrid cube mesh: each GPU links 4
    others), so the NVLink domain spans all 8 but is not complete. PIX puts GPU0, GPU1
    and mlx5_0 behind one PCIe switch (and likewise 2-3/mlx5_1, 4-5/mlx5_2, 6-7/mlx5_3);
    PHB joins two switches per CPU socket; SYS crosses sockets."""
    t = discover_nvidia_smi([smi(fixtures, "dgx1-v100-4nic")], node="dgx1").node_topologies[0]
    gpus = tuple(f"GPU{i}" for i in range(8))
    assert domains(t) == [
        ("nvlink", gpus, "NV1", False),
        ("pcie-switch", ("GPU0", "GPU1", "mlx5_0"), "PIX", True),
        ("pcie-switch", ("GPU2", "GPU3", "mlx5_1"), "PIX", True),
        ("pcie-switch", ("GPU4", "GPU5", "mlx5_2"), "PIX", True),
        ("pcie-switch", ("GPU6", "GPU7", "mlx5_3"), "PIX", True),
        ("host-bridge", ("GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0", "mlx5_1"), "PHB", True),
        ("host-bridge", ("GPU4", "GPU5", "GPU6", "GPU7", "mlx5_2", "mlx5_3"), "PHB", True),
    ]
    assert t.link("GPU0", "GPU3") == "NV2" and t.link("GPU0", "GPU5") == "SYS"
    assert t.gpus[0].cpus == "0-19,40-59" and t.devices[8].alias == "mlx5_0"


def test_nvswitch_boards_and_numa(fixtures: Path) -> None:
    """H100 / A100 boards: NV18 / NV12 between every pair (NVSwitch); NUMA Affinity 0 for
    GPU0-3 and 1 for GPU4-7."""
    h100 = discover_nvidia_smi([smi(fixtures, "h100-8gpu-ht-affinity")]).node_topologies[0]
    assert h100.node == "nvidia-smi-topo-h100-8gpu-ht-affinity"
    assert domains(h100)[0] == ("nvlink", tuple(f"GPU{i}" for i in range(8)), "NV18", True)
    numa = {d.name: d.devices for d in h100.domains if d.kind == "numa"}
    assert numa == {
        "numa0": ("GPU0", "GPU1", "GPU2", "GPU3"),
        "numa1": ("GPU4", "GPU5", "GPU6", "GPU7"),
    }
    assert h100.gpus[4].cpus == "52-103,156-207" and h100.gpus[4].numa == 1
    a100 = discover_nvidia_smi([smi(fixtures, "a100-8gpu-nv12")]).node_topologies[0]
    assert domains(a100)[0][2] == "NV12"


def test_pcie_box_with_nic_legend(fixtures: Path) -> None:
    """4x RTX 6000 Ada on two sockets: GPU0/1 and NIC0/1 on NUMA 0 (NODE), GPU2/3 and
    NIC2/3 on NUMA 1; NIC pairs share a PCIe switch (PIX); the legend names mlx5_0..3."""
    t = discover_nvidia_smi([smi(fixtures, "4x-rtx6000ada-pcie-4nic-legend")]).node_topologies[0]
    assert [(d.kind, d.name, d.devices) for d in t.domains] == [
        ("pcie-switch", "pcie-switch0", ("NIC0", "NIC1")),
        ("pcie-switch", "pcie-switch1", ("NIC2", "NIC3")),
        ("numa", "numa0", ("GPU0", "GPU1", "NIC0", "NIC1")),
        ("numa", "numa1", ("GPU2", "GPU3", "NIC2", "NIC3")),
    ]
    assert [d.alias for d in t.devices if d.kind == "nic"] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
    ]
    two = discover_nvidia_smi([smi(fixtures, "2gpu-pcie-phb")]).node_topologies[0]
    assert domains(two) == [("host-bridge", ("GPU0", "GPU1"), "PHB", True)]
    nv2 = discover_nvidia_smi([smi(fixtures, "2gpu-nvlink-nv2")]).node_topologies[0]
    assert domains(nv2) == [("nvlink", ("GPU0", "GPU1"), "NV2", True)]


def test_annotation_round_trip(fixtures: Path) -> None:
    t = discover_nvidia_smi([smi(fixtures, "dgx1-v100-4nic")], node="dgx1").node_topologies[0]
    patch = node_patch(t)
    assert patch["kind"] == "Node" and patch["metadata"]["name"] == "dgx1"
    text = patch["metadata"]["annotations"][NODE_TOPOLOGY_ANNOTATION]
    assert json.loads(text)["version"] == 1
    assert decode_node_topology("dgx1", text) == t
    with pytest.raises(ValueError, match="not JSON"):
        decode_node_topology("dgx1", "{oops")


def test_bad_matrices_fail_with_the_line(fixtures: Path) -> None:
    text = smi(fixtures, "dgx1-v100-4nic").read_text()
    lines = text.splitlines()
    # truncated after GPU3's row: GPU4.. rows missing
    with pytest.raises(ParseError, match="no row for GPU4"):
        parse("\n".join(lines[:5]), "n", "cut.txt")
    # a cell garbled
    garbled = lines.copy()
    garbled[3] = garbled[3].replace("NV2", "NVX", 1)
    with pytest.raises(ParseError) as err:
        parse("\n".join(garbled), "n", "bad.txt")
    assert err.value.line == 4 and "unknown link code 'NVX'" in str(err.value)
    # a row cut short
    short = lines.copy()
    short[2] = short[2].rsplit("\t", 6)[0]
    with pytest.raises(ParseError) as err:
        parse("\n".join(short), "n", "short.txt")
    assert err.value.line == 3
    # asymmetric
    asym = lines.copy()
    asym[1] = asym[1].replace("NV1", "NV2", 1)
    with pytest.raises(ParseError, match="not symmetric"):
        parse("\n".join(asym), "n", "asym.txt")
    with pytest.raises(ParseError, match="no header"):
        parse("hello\n", "n", "x.txt")


def test_node_name_must_be_a_kubernetes_name(fixtures: Path) -> None:
    """``--node BAD_name`` printed a Node patch the API server would reject."""
    with pytest.raises(InputError, match="--node: 'BAD_name' is not a DNS subdomain"):
        discover_nvidia_smi([smi(fixtures, "dgx1-v100-4nic")], node="BAD_name")


def test_dra_real_h100_node() -> None:
    """A real capture (SOURCES.md in tests/discovery/data): an H100 node's 8 GPUs, each
    on its own root complex (pci0000:44, 55, ... bb): no two share a PCIe root, so DRA
    gives no PCIe domain; the compute-domain daemon/channel devices are not hardware."""
    problems: list[object] = []
    slices = slices_from_documents(
        read_documents(DATA / "aicr-h100-resourceslices-gpu-node-1.yaml"),
        problems,  # type: ignore[arg-type]
    )
    assert problems == [] and len(slices) == 2
    d = discover_dra(slices)
    (t,) = d.node_topologies
    assert t.node == "gpu-node-1" and t.domains == () and d.hypernodes == ()
    assert [x.name for x in t.devices] == [f"gpu.nvidia.com/gpu-{i}" for i in range(8)]
    assert {x.pcie_root for x in t.devices} == {
        f"pci0000:{r}" for r in ("44", "55", "66", "77", "88", "99", "aa", "bb")
    }
    assert t.devices[0].alias == "GPU-c4529c8d-69c4-b61d-e0bc-7b2460096005"


def test_dra_numa_pcie_and_cliques() -> None:
    """Unit input (not a capture): two nodes whose GPUs share roots and NUMA nodes and
    carry a clique id, as the attributes are defined (KEP-6072 numaNode, driver-local
    cliqueID, v1beta1 "basic" nesting)."""
    raw = [
        {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{n}-gpus"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": n,
                "pool": {"name": n},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "basic": {
                            "attributes": {
                                "type": {"string": "gpu"},
                                "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 2}"},
                                "resource.kubernetes.io/numaNode": {"int": i // 4},
                                "cliqueID": {"string": "fab1.7"},
                            }
                        },
                    }
                    for i in range(8)
                ],
            },
        }
        for n in ("gb-a", "gb-b")
    ]
    problems: list[object] = []
    slices = slices_from_documents([(None, r) for r in raw], problems)  # type: ignore[misc]
    d = discover_dra(slices)
    assert problems == []
    t = d.node_topologies[0]
    kinds = [(x.kind, x.devices) for x in t.domains]
    assert kinds[:2] == [
        ("pcie-root", ("gpu.nvidia.com/gpu-0", "gpu.nvidia.com/gpu-1")),
        ("pcie-root", ("gpu.nvidia.com/gpu-2", "gpu.nvidia.com/gpu-3")),
    ]
    assert ("numa", tuple(f"gpu.nvidia.com/gpu-{i}" for i in range(4))) in kinds
    (clique,) = d.hypernodes
    assert clique.name == "dra-clique-fab1.7" and nodes_of(clique) == ["gb-a", "gb-b"]
    bad = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "x"},
        "spec": {
            "driver": "d",
            "nodeName": "n",
            "devices": [{"name": "a", "attributes": {"k": {"int": "7"}}}],
        },
    }
    problems.clear()
    slices_from_documents([(None, bad)], problems)  # type: ignore[list-item]
    assert "spec.devices[0].attributes.k" in str(problems[0])
    problems.clear()  # metadata of the wrong shape is a problem, not an AttributeError
    slices_from_documents([(None, {**bad, "metadata": [1]})], problems)  # type: ignore[list-item]
    assert "ResourceSlice/?: metadata: expected an object, got a list" in str(problems[0])


def test_typed_objects_feed_the_source() -> None:
    """The Kubernetes adapter hands typed objects over; no manifest is needed."""
    s = ResourceSlice(
        name="s",
        driver="gpu.nvidia.com",
        node_name="n1",
        devices=(DraDevice("gpu-0", {"gpu.nvidia.com/cliqueID": "c"}),),
    )
    assert discover_dra([s]).hypernodes[0].name == "dra-clique-c"
