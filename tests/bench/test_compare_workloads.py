"""The comparison's placement checks (bench/compare_workloads.py): each counts a broken rule
from placements, so the table can say what each scheduler honoured, not only how fast."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import compare_workloads as w

from tierra.kube.testing.fake import PodShape


def rack_of(node: str) -> str:
    return f"rack-{int(node.split('-')[1]) // 10:03d}"


def test_each_app_carries_its_rule() -> None:
    shape = PodShape(gpus=1)
    anti = w.rules_pod("p-0", "ns", 0, "tierra", shape)["spec"]
    preferred = w.rules_pod("p-10", "ns", 10, "tierra", shape)["spec"]
    hard = w.rules_pod("p-20", "ns", 20, "tierra", shape)["spec"]
    soft = w.rules_pod("p-30", "ns", 30, "tierra", shape)["spec"]
    required = anti["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required[0]["labelSelector"] == {"matchLabels": {"app": "app-0000"}}
    assert (
        "preferredDuringSchedulingIgnoredDuringExecution"
        in (preferred["affinity"]["podAntiAffinity"])
    )
    assert hard["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "DoNotSchedule"
    assert hard["topologySpreadConstraints"][0]["topologyKey"] == w.RACK
    assert soft["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"
    assert soft["topologySpreadConstraints"][0]["topologyKey"] == w.HOSTNAME


def test_rules_broken_are_counted_per_rule() -> None:
    node_of = {
        # app 0, required anti-affinity: two on node-00000 -> 1 pair
        "a0": "node-00000",
        "a1": "node-00000",
        "a2": "node-00001",
        # app 1, preferred: three on one node -> 3 pairs
        "b0": "node-00005",
        "b1": "node-00005",
        "b2": "node-00005",
        # app 2, spread over racks (3 racks in all): 2 in rack 0, 0 in rack 2 -> 1 over
        "c0": "node-00000",
        "c1": "node-00001",
        "c2": "node-00010",
        # app 3, spread over hosts: 2 on one node -> 1 over
        "d0": "node-00020",
        "d1": "node-00020",
    }
    index = {k: {"a": 0, "b": 10, "c": 20, "d": 30}[k[0]] + int(k[1]) for k in node_of}
    broken = w.rules_honoured(node_of, index, rack_of, racks=3)
    assert broken == {"anti-required": 1, "anti-preferred": 3, "spread-hard": 1, "spread-soft": 1}
    apart = {k: f"node-{i * 10:05d}" for i, k in enumerate(node_of)}
    assert set(w.rules_honoured(apart, index, rack_of, racks=20).values()) == {0}


def test_a_pv_outside_the_pods_rack_is_counted() -> None:
    node_of = {"g-0": "node-00003", "g-1": "node-00013", "g-2": "node-00001"}
    volume_of = {"g-0": "pv-rack-000-007", "g-1": "pv-rack-000-008"}
    assert w.volumes_honoured(node_of, volume_of, rack_of) == {
        "pv-in-another-rack": 1,
        "claim-without-pv": 1,
    }
    pv = w.persistent_volume("pv-rack-004-001", "rack-004")
    term = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == ["rack-004"]
    assert w.volumes_per_rack(pods=100, racks=10, largest_gang=64) == 64
    assert w.volumes_per_rack(pods=1000, racks=10, largest_gang=64) == 200


def test_wave_constraints_are_checked_from_placements() -> None:
    kinds = {"k": "kueue-slices", "b": "bounded-wait", "x": "exclusive", "o": "bounded-wait"}
    members = {g: [f"{g}-{r}" for r in range(8)] for g in kinds}
    node_of = {}
    for r in range(8):
        node_of[f"k-{r}"] = "node-00000" if r < 4 else "node-00011"  # block 0, slices by rack
        node_of[f"b-{r}"] = f"node-{10 + r:05d}"  # rack 1
        node_of[f"x-{r}"] = f"node-{20 + r % 4:05d}"  # rack 2
        node_of[f"o-{r}"] = f"node-{30 + r:05d}"  # rack 3
    assert set(w.wave_honoured(members, kinds, node_of, rack_of).values()) == {0}
    node_of["k-3"] = "node-00012"  # a slice across two racks
    node_of["o-0"] = "node-00029"  # another gang in the exclusive rack, and o spans racks
    broken = w.wave_honoured(members, kinds, node_of, rack_of)
    assert broken == {"kueue-slices": 1, "bounded-wait": 1, "exclusive": 1}


def test_wave_gangs_carry_their_annotations() -> None:
    assert [w.wave_kind(g) for g in range(6)] == [
        "kueue-slices",
        "bounded-wait",
        "kueue-slices",
        "bounded-wait",
        "kueue-slices",
        "exclusive",
    ]
    pod = w.wave_pod("ns", "g", 5, "kueue-slices", PodShape(gpus=2))
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "5"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-slice-size"] == "4"
    pg = w.wave_podgroup("ns", "g", "exclusive")
    assert pg["metadata"]["annotations"] == {"topology.tierra.dev/exclusive-tier": "rack"}
    assert "networkTopology" not in w.wave_podgroup("ns", "g", "kueue-slices")["spec"]
