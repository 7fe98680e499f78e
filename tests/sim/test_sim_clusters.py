"""Built-in clusters: shapes and counts per preset, snapshot files that read back."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tierra.api.snapshot import load_snapshot
from tierra.errors import ConfigError, InputError
from tierra.sim.clusters import PRESETS, build_cluster, load_cluster, write_cluster
from tierra.sim.cost import default_cost_model

GPU = "nvidia.com/gpu"

# preset, nodes -> (GPUs, tier name -> HyperNodes of that tier name, trees)
EXPECTED = {
    ("superpod", 100): (800, {"su": 4, "spine": 1}, 1),
    ("superpod", 1000): (8000, {"su": 32, "spine": 8, "superspine": 1}, 1),
    ("nvl72", 200): (800, {"nvlink": 12, "leaf": 2, "spine": 1}, 1),
    ("fattree", 64): (512, {"tor": 8, "aggregation": 2, "core": 1}, 1),
    ("fattree", 130): (1040, {"tor": 17, "aggregation": 5, "core": 1}, 1),
    ("mixed", 100): (8 * 64 + 4 * 36, {"nvlink": 2, "leaf": 5, "spine": 1}, 1),
    ("cloud", 1100): (8800, {"layer-3": 69, "layer-2": 18, "layer-1": 3}, 3),
}


@pytest.mark.parametrize(("preset", "nodes"), list(EXPECTED), ids=str)
def test_preset_shape(preset: str, nodes: int) -> None:
    c = build_cluster(preset, nodes)
    gpus, tiers, trees = EXPECTED[(preset, nodes)]
    assert len(c.nodes) == nodes
    assert c.gpus == gpus
    assert dict(Counter(h.tier_name for h in c.hypernodes)) == tiers
    ix = c.index
    assert len(ix.trees) == trees and all(t.usable for t in ix.trees)
    assert not [p for p in ix.problems if p.severity == "error"]
    # every node sits in exactly one lowest domain, and every HyperNode carries spec.link
    for name in ix.node_names:
        assert len(ix.leaves_of(name)) == 1, name
    assert all(h.link is not None and h.link.bandwidth_gbps for h in c.hypernodes)


def test_superpod_su_is_32_nodes_of_8_gpus() -> None:
    c = build_cluster("superpod", 64)
    su = [h for h in c.hypernodes if h.tier_name == "su"]
    assert [len(c.index.real_nodes[c.index.ix[h.name]]) for h in su] == [32, 32]
    assert {n.allocatable[GPU] for n in c.nodes} == {8000}


def test_nvl72_racks_hold_72_gpus_and_carry_cliques() -> None:
    c = build_cluster("nvl72", 72)
    ix = c.index
    racks = [h for h in c.hypernodes if h.tier_name == "nvlink"]
    assert [len(ix.real_nodes[ix.ix[h.name]]) * 4 for h in racks] == [72, 72, 72, 72]
    cliques = {n.labels["nvidia.com/gpu.clique"] for n in c.nodes}
    assert len(cliques) == 4


def test_mixed_depth_leaves_sit_at_two_tiers() -> None:
    c = build_cluster("mixed", 100)
    ix = c.index
    lowest = Counter(int(ix.tier[ix.leaves_of(n)[0]]) for n in ix.node_names)
    assert lowest == {1: 36, 2: 64}  # GB200 trays under racks, H100 nodes on leaves


def test_cloud_labels_and_unordered_names() -> None:
    c = build_cluster("cloud", 64)
    n = c.nodes[0]
    assert n.labels["topology.k8s.aws/network-node-layer-3"].startswith("nn-")
    assert n.name.endswith(".ec2.internal")
    assert [m.selector.labels is not None for m in c.hypernodes[0].members] == [True]
    by_name = sorted(c.nodes, key=lambda x: x.name)
    layer3 = [x.labels["topology.k8s.aws/network-node-layer-3"] for x in by_name[:16]]
    assert len(set(layer3)) > 1  # name order is not topology order


def test_unknown_preset_and_bad_size() -> None:
    with pytest.raises(ConfigError, match="unknown cluster preset 'dgx'; choose one of: cloud"):
        build_cluster("dgx", 128)
    with pytest.raises(ConfigError, match="between 64 and 100,000"):
        build_cluster("fattree", 63)
    with pytest.raises(ConfigError, match="between 64 and 100,000"):
        build_cluster("superpod", 100_001)


def test_write_and_read_back(tmp_path: Path) -> None:
    c = build_cluster("mixed", 80)
    paths = write_cluster(c, tmp_path / "out")
    snap = load_snapshot(paths)
    assert not snap.errors
    assert len(snap.nodes) == 80 and len(snap.hypernodes) == len(c.hypernodes)
    again = load_cluster([tmp_path / "out"])
    assert again.index.node_names == c.index.node_names
    assert {h.name: h.link for h in again.hypernodes} == {h.name: h.link for h in c.hypernodes}


def test_snapshot_without_gpus_is_refused(fixtures: Path) -> None:
    """A GPU-less snapshot ran a silent empty simulation (0 jobs, a table of dashes)."""
    gke = fixtures / "k8s-nodes" / "k8s-node-gke-full-object.yaml"
    with pytest.raises(InputError, match=r"no node has a whole nvidia\.com/gpu"):
        load_cluster([gke])


def test_links_come_from_the_cost_model() -> None:
    cm = default_cost_model()
    c = build_cluster("fattree", 64, cm)
    core = next(h for h in c.hypernodes if h.tier_name == "core")
    assert core.link is not None and core.link.oversubscription == 7
    assert set(PRESETS) == {"superpod", "nvl72", "fattree", "mixed", "cloud"}
