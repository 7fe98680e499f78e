"""``tierra tree --inside``: each node's inside below it, from the real H100 capture's
ResourceSlices and from a DGX-1's nvidia-smi annotation, nested where one domain holds
another; the JSON gives the same domains per node."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from run_cli import run
from tierra.api.node_topology import NODE_TOPOLOGY_ANNOTATION
from tierra.discovery.nvidia_smi import parse

FIXTURES = Path(__file__).parent.parent / "fixtures"
CAPTURE = FIXTURES / "dra" / "aicr-h100-resourceslices-gpu-node-1.yaml"
DGX1 = FIXTURES / "gpu-topo" / "nvidia-smi-topo-dgx1-v100-4nic.txt"


def _write(tmp_path: Path, node: str, annotations: dict[str, str] | None = None) -> Path:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "annotations": annotations or {}},
            "status": {
                "allocatable": {"cpu": "64", "memory": "1Ti", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        {
            "apiVersion": "topology.tierra.dev/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "rack"},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"exactMatch": {"name": node}}}],
            },
        },
    ]
    path = tmp_path / f"{node}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_the_capture_s_pcie_roots_show_under_its_node(tmp_path: Path) -> None:
    cluster = _write(tmp_path, "gpu-node-1")
    code, out, _ = run("tree", cluster, CAPTURE, "--inside")
    assert code == 0
    assert "pcie-root pci0000:44: gpu.nvidia.com/gpu-0" in out
    code, out, _ = run("tree", cluster, CAPTURE, "--inside", "-o", "json")
    (rack,) = json.loads(out)["children"]
    domains = rack["inside"]["gpu-node-1"]["domains"]
    assert len([d for d in domains if d["level"] == "pcie-root"]) == 8
    assert rack["members"] == ["gpu-node-1"]  # --inside implies --nodes


def test_nvidia_smi_domains_nest_by_what_they_hold(tmp_path: Path) -> None:
    text = parse(DGX1.read_text(), "dgx1").to_json()
    cluster = _write(tmp_path, "dgx1", {NODE_TOPOLOGY_ANNOTATION: text})
    code, out, _ = run("tree", cluster, "--inside")
    assert code == 0
    lines = out.splitlines()
    switch = next(i for i, ln in enumerate(lines) if "pcie-switch" in ln and "GPU0" in ln)
    bridge = next(i for i, ln in enumerate(lines) if "host-bridge" in ln and "GPU0" in ln)
    indent = lambda ln: len(ln) - len(ln.lstrip(" │├└─"))  # noqa: E731
    assert bridge < switch and indent(lines[switch]) > indent(lines[bridge])
    assert "(nvidia-smi)" in lines[switch] and " PIX:" in lines[switch]
    assert any("nvlink" in ln for ln in lines)
