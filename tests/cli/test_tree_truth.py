"""``tierra tree`` tells the truth: what is free, how many nodes, in numbers people read."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from run_cli import run

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "canonical.yaml"


def walk(doc: dict) -> list[dict]:  # type: ignore[type-arg]
    return [doc, *(d for c in doc["children"] for d in walk(c))]


def test_gpus_on_notready_and_cordoned_nodes_are_not_free() -> None:
    """node-5 is NotReady and node-6 cordoned (8 GPUs each): 'GPU 56/64 free' counted them."""
    code, out, _ = run("tree", EXAMPLE)
    assert code == 0
    assert "<cluster> · tier 4 · 8 nodes · GPU 40/64 free (16 on unavailable nodes)" in out
    assert "s2 · tier 1 (leaf) · 2 nodes · GPU 8/16 free (8 on unavailable nodes)" in out
    assert "s1 · tier 1 (leaf) · 2 nodes · GPU 16/16 free · CPU 128/128 free · healthy" in out
    code, out, _ = run("tree", EXAMPLE, "-o", "json")
    s5 = json.loads(out)["children"][0]["children"][1]
    assert s5["gpu"] == {"free": 16, "allocatable": 32, "unavailable": 16}
    assert s5["cpu"] == {"free": "128", "allocatable": "256", "unavailable": "128"}


def test_the_root_counts_the_nodes_there_are(tmp_path: Path) -> None:
    """Members naming nodes the snapshot lacks made s6 '8 nodes' under a '4 nodes' root."""
    docs = [
        d
        for d in yaml.safe_load_all(EXAMPLE.read_text())
        if d["kind"] == "HyperNode" or d["metadata"]["name"] in ("node-0", "node-1", "node-2")
    ]
    docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "spare"}})
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code, out, _ = run("tree", path)
    assert code == 0
    assert "<cluster> · tier 4 · 4 nodes (+5 listed, not in the snapshot)" in out
    assert "s6 · tier 3 (core) · 3 nodes (+5 listed, not in the snapshot)" in out
    assert "s1 · tier 1 (leaf) · 1 node (+1 listed, not in the snapshot)" in out
    code, out, _ = run("tree", path, "-o", "json")
    root = json.loads(out)
    assert root["nodes"] == 4 and root["missingNodes"] == [f"node-{i}" for i in range(3, 8)]
    assert all(d["nodes"] <= root["nodes"] for d in walk(root))


def test_large_numbers_are_grouped(tmp_path: Path) -> None:
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"gpu-{i:04d}", "labels": {"rack": f"r{i // 500}"}},
            "status": {
                "allocatable": {"cpu": "224", "nvidia.com/gpu": "8", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(1500)
    ]
    hns = [
        {
            "apiVersion": "topology.tierra.dev/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": f"r{k}"},
            "spec": {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": f"r{k}"}}}}
                ],
            },
        }
        for k in range(3)
    ]
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump_all([*nodes, *hns]))
    code, out, _ = run("tree", path)
    assert code == 0
    assert (
        "<cluster> · tier 2 · 1,500 nodes · GPU 12,000/12,000 free · CPU 336,000/336,000 free"
        in out
    )
    assert "r0 · tier 1 · 500 nodes · GPU 4,000/4,000 free · CPU 112,000/112,000 free" in out
    code, out, _ = run("tree", path, "-o", "json")
    assert json.loads(out)["gpu"] == {"free": 12000, "allocatable": 12000, "unavailable": 0}
