"""Node labels -> HyperNodes: ordered levels, presets, Kueue/KAI Topology objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from disc_helpers import by_name, children_of, node, nodes_of

from tierra.api.snapshot import load_snapshot, read_documents
from tierra.discovery.labels import discover_labels, make_topology
from tierra.discovery.presets import PRESETS, preset
from tierra.discovery.result import MANAGED_BY
from tierra.errors import ConfigError

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"


def kind_cluster_nodes(fixtures: Path) -> list[Any]:
    """The Kueue TAS kind cluster: its 8 workers with the labels the config gives them.

    kind names workers ``<cluster>-worker``, ``-worker2`` ... ``-worker8`` in order.
    """
    config = yaml.safe_load(
        (fixtures / "k8s-nodes" / "kueue-tas-kind-cluster-node-labels.yaml").read_text()
    )
    workers = [n for n in config["nodes"] if n["role"] == "worker"]
    names = ["kind-worker"] + [f"kind-worker{i}" for i in range(2, len(workers) + 1)]
    return [node(name, w["labels"]) for name, w in zip(names, workers, strict=True)]


def test_kueue_kind_cluster_by_levels(fixtures: Path) -> None:
    """The kind config gives workers 1-2 b1/r1, 3-4 b1/r2, 5-6 b2/r1, 7-8 b2/r2. Rack r1
    exists in both blocks: by path these are four racks of two nodes under two blocks
    (Volcano's label discoverer would give "r1" two parents)."""
    nodes = kind_cluster_nodes(fixtures)
    topo = make_topology("tas", [BLOCK, RACK, "kubernetes.io/hostname"])
    d = discover_labels(nodes, [topo])
    hns = by_name(d.hypernodes)
    assert sorted(hns) == ["tas-b1", "tas-b1-r1", "tas-b1-r2", "tas-b2", "tas-b2-r1", "tas-b2-r2"]
    assert nodes_of(hns["tas-b1-r1"]) == ["kind-worker", "kind-worker2"]
    assert nodes_of(hns["tas-b2-r2"]) == ["kind-worker7", "kind-worker8"]
    assert children_of(hns["tas-b2"]) == ["tas-b2-r1", "tas-b2-r2"]
    assert {h.name: h.tier for h in d.hypernodes}["tas-b1"] == 2
    assert hns["tas-b1-r1"].tier_name == RACK and hns["tas-b1"].tier_name == BLOCK
    assert all(h.meta.labels[MANAGED_BY] == "labels" for h in d.hypernodes)
    assert hns["tas-b2-r1"].meta.annotations["topology.tierra.dev/source-detail"] == (
        f"{BLOCK}=b2,{RACK}=r1"
    )


def test_kueue_and_kai_topology_objects_as_presets(fixtures: Path, tmp_path: Path) -> None:
    """The Kueue sample (Topology "default" + a ResourceFlavor selecting node-group
    tas-group) and the KAI Topology ("cluster-topology") both list block, rack, hostname."""
    nodes = kind_cluster_nodes(fixtures)
    crds = fixtures / "k8s-topology-crds"
    kueue = preset("kueue", read_documents(crds / "kueue-tas-sample-gpu-queues.yaml"))
    assert [lv.key for lv in kueue[0].levels] == [BLOCK, RACK]
    assert kueue[0].name == "default" and kueue[0].selectors  # the flavor's nodeLabels
    d = discover_labels(nodes, kueue)
    assert len(d.hypernodes) == 6 and by_name(d.hypernodes)["default-b1-r2"].tier == 1
    # the flavor limits the topology to its node group: a node outside joins nothing
    outsider = node("gpu-x", {BLOCK: "b1", RACK: "r1"})
    d2 = discover_labels([*nodes, outsider], kueue)
    assert "gpu-x" not in nodes_of(by_name(d2.hypernodes)["default-b1-r1"])
    kai = preset("kai", read_documents(crds / "kai-topology-cluster-topology.yaml"))
    assert kai[0].name == "cluster-topology"
    assert len(discover_labels(nodes, kai).hypernodes) == 6
    with pytest.raises(ConfigError, match=r"needs a kai\.scheduler Topology"):
        preset("kai", read_documents(crds / "kueue-tas-sample-gpu-queues.yaml"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("[1]", r"Topology/t: spec: expected an object, got a list"),
        ("{levels: 7}", r"Topology/t: spec\.levels: expected a list, got int"),
        ("{levels: []}", r"Topology/t: spec\.levels: must be a non-empty list"),
        ("{levels: [{nodeLabel: 5}]}", r"spec\.levels\[0\]\.nodeLabel: expected a string"),
        ("{levels: [{alias: x}]}", r"spec\.levels\[0\]\.nodeLabel: is required"),
    ],
)
def test_malformed_topology_object(tmp_path: Path, spec: str, message: str) -> None:
    """A garbled KAI Topology is a ConfigError naming the field (``spec: [1]`` crashed)."""
    f = tmp_path / "t.yaml"
    f.write_text(
        f"apiVersion: kai.scheduler/v1alpha1\nkind: Topology\nmetadata: {{name: t}}\nspec: {spec}\n"
    )
    with pytest.raises(ConfigError, match=message):
        preset("kai", read_documents(f))


def test_missing_labels() -> None:
    """No narrowest label: the node joins nothing. No wider label: its tree stops below."""
    nodes = [
        node("a", {"block": "b1", "rack": "r1"}),
        node("b", {"block": "b1"}),  # no rack: joins nothing
        node("c", {"rack": "r9"}),  # no block: a rack without a parent
    ]
    d = discover_labels(nodes, [make_topology("t", ["block", "rack"])])
    hns = by_name(d.hypernodes)
    assert sorted(hns) == ["t-b1", "t-b1-r1", "t-r9"]
    assert nodes_of(hns["t-r9"]) == ["c"] and hns["t-r9"].tier == 1
    assert "b" not in {n for h in d.hypernodes for n in nodes_of(h)}
    assert "1 node(s) lack the narrowest label rack" in str(d.notes[0])


def test_several_topologies_at_once() -> None:
    nodes = [node(f"n{i}", {"rack": f"r{i // 2}", "nvl": f"c{i // 4}"}) for i in range(8)]
    d = discover_labels(nodes, [make_topology("net", ["rack"]), make_topology("nvl", ["nvl"])])
    assert sorted(h.name for h in d.hypernodes) == [
        "net-r0",
        "net-r1",
        "net-r2",
        "net-r3",
        "nvl-c0",
        "nvl-c1",
    ]


def test_names_are_dns_safe_and_clashes_resolved() -> None:
    nodes = [node("a", {"rack": "Rack_1"}), node("b", {"rack": "rack-1"})]
    d = discover_labels(nodes, [make_topology("t", ["rack"])])
    names = sorted(h.name for h in d.hypernodes)
    assert len(names) == 2 and all(n.startswith("t-rack-1-") for n in names)
    again = discover_labels(list(reversed(nodes)), [make_topology("t", ["rack"])])
    assert sorted(h.name for h in again.hypernodes) == names  # order does not matter


def test_level_validation() -> None:
    with pytest.raises(ConfigError, match="only be the last level"):
        make_topology("t", ["kubernetes.io/hostname", "rack"])
    with pytest.raises(ConfigError, match="listed twice"):
        make_topology("t", ["rack", "rack"])
    with pytest.raises(ConfigError, match="at least one label key"):
        make_topology("t", ["kubernetes.io/hostname"])


def test_cloud_presets() -> None:
    """EKS: 4-layer nodes (carrying layer-4) and 3-layer nodes are separate forests;
    nvidia-clique: one NVLink tier. Synthetic nodes: no real labelled EKS Node objects
    are published (SOURCES.md lists the gap); the keys are AWS's documented ones."""
    eks = "topology.k8s.aws/network-node-layer-"
    nodes = [
        node("p5-a", {f"{eks}1": "nn-1", f"{eks}2": "nn-2", f"{eks}3": "nn-3", f"{eks}4": "nn-4"}),
        node("p4-a", {f"{eks}1": "nn-1", f"{eks}2": "nn-2", f"{eks}3": "nn-5"}),
    ]
    d = discover_labels(nodes, preset("eks"))
    tiers = {h.name: h.tier for h in d.hypernodes}
    assert tiers["eks-nn-1-nn-2-nn-3-nn-4"] == 1 and tiers["eks-nn-1"] == 4
    assert tiers["eks-3layer-nn-1-nn-2-nn-5"] == 1 and tiers["eks-3layer-nn-1"] == 3
    clique = discover_labels(
        [
            node("g1", {"nvidia.com/gpu.clique": "a.1"}),
            node("g2", {"nvidia.com/gpu.clique": "a.1"}),
        ],
        preset("nvidia-clique"),
    )
    (hn,) = clique.hypernodes
    assert nodes_of(hn) == ["g1", "g2"] and hn.link is not None and hn.link.medium == "nvlink"
    assert set(PRESETS) == {"eks", "gke", "oke", "nvidia-clique", "topograph", "kueue", "kai"}


def test_topograph_labels_two_dimensions() -> None:
    """Topograph's canonical labels: ``fabric.topograph.run/tier-0`` closest; the NVLink
    domain is a separate forest (they are orthogonal)."""
    t = "fabric.topograph.run/tier-"
    nodes = [
        node(
            f"n{i}",
            {
                f"{t}0": f"leaf{i // 2}",
                f"{t}1": "spine",
                "accelerator.topograph.run/domain": f"nvl{i % 2}",
            },
        )
        for i in range(4)
    ]
    d = discover_labels(nodes, preset("topograph"))
    hns = by_name(d.hypernodes)
    assert hns["topograph-spine"].tier == 2
    assert children_of(hns["topograph-spine"]) == ["topograph-spine-leaf0", "topograph-spine-leaf1"]
    assert nodes_of(hns["topograph-nvl-nvl0"]) == ["n0", "n2"]


def test_real_gke_node_object(fixtures: Path) -> None:
    """The vendored GKE Node carries region us-central1 and zone us-central1-b."""
    snap = load_snapshot([fixtures / "k8s-nodes" / "k8s-node-gke-full-object.yaml"])
    topo = make_topology("geo", ["topology.kubernetes.io/region", "topology.kubernetes.io/zone"])
    d = discover_labels(snap.nodes, [topo])
    assert [(h.name, h.tier) for h in d.hypernodes] == [
        ("geo-us-central1-us-central1-b", 1),
        ("geo-us-central1", 2),
    ]
