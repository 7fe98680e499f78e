"""The examples under examples/kueue and examples/tierra through ``tierra schedule``, and
tierra's own vocabulary (PodGroup annotations) as validate reads it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import yaml
from tests.run_cli import one_line, run

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "examples" / "kueue" / "cluster.yaml"


def bindings(example: str) -> dict[str, str]:
    code, out, err = run("schedule", CLUSTER, REPO / "examples" / example, "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["unschedulable"] == [], result
    return {b["pod"].split("/", 1)[1]: b["node"] for b in result["bindings"]}


def rack(node: str) -> str:
    return "-".join(node.split("-")[:2])


def test_required_rack_example() -> None:
    bound = bindings("kueue/required-rack.yaml")
    assert len(bound) == 4 and len({rack(n) for n in bound.values()}) == 1


def test_slices_example_ranks_share_racks() -> None:
    bound = bindings("kueue/slices.yaml")
    assert rack(bound["sliced-job-0"]) == rack(bound["sliced-job-1"])
    assert rack(bound["sliced-job-2"]) == rack(bound["sliced-job-3"])
    assert len({n.split("-")[0] for n in bound.values()}) == 1


def test_multi_layer_example_keeps_every_layer() -> None:
    bound = bindings("kueue/multi-layer.yaml")
    assert len({n.split("-")[0] for n in bound.values()}) == 1
    assert all(c % 4 == 0 for c in Counter(map(rack, bound.values())).values())
    assert all(c % 2 == 0 for c in Counter(bound.values()).values())


def test_leader_workers_example_in_one_rack() -> None:
    bound = bindings("kueue/leader-workers.yaml")
    assert len(bound) == 4 and len({rack(n) for n in bound.values()}) == 1


def test_pod_group_example_one_rack_in_rank_order() -> None:
    """Kueue's plain pod group (no PodGroup object): one gang of its count, in one rack,
    index i on the i-th slot."""
    bound = bindings("kueue/pod-group.yaml")
    assert len(bound) == 4 and len({rack(n) for n in bound.values()}) == 1
    assert [bound[f"train-{i}"] for i in range(4)] == sorted(bound.values())


def test_balanced_example_takes_the_block_with_the_higher_threshold() -> None:
    """examples/kueue/balanced (Kueue's "balanced placement; select correct block"):
    with the gate, 11 + 11 in block b2; without it best fit packs block b1."""
    base = REPO / "examples" / "kueue" / "balanced"

    def per_node(*flags: Path | str) -> dict[str, int]:
        code, out, err = run("schedule", base / "cluster.yaml", "-o", "json", *flags)
        assert code == 0, err
        return dict(Counter(b["node"] for b in json.loads(out)["bindings"]))

    assert per_node("--config", base / "config.yaml") == {"b2-r2-x3": 11, "b2-r2-x4": 11}
    assert per_node() == {"b1-r1-x1": 20, "b1-r1-x2": 2}


def test_nested_slices_example_three_layers_and_ranks() -> None:
    bound = bindings("tierra/nested-slices.yaml")
    by_rank = {7 - i: bound[f"nested-{i}"] for i in range(8)}
    slots = sorted(bound.values())
    assert [by_rank[r] for r in range(8)] == slots  # rank r on the r-th slot
    assert all(c % 4 == 0 for c in Counter(map(rack, bound.values())).values())
    assert all(c % 2 == 0 for c in Counter(bound.values()).values())


def test_required_preferred_example_in_one_rack() -> None:
    bound = bindings("tierra/required-preferred.yaml")
    assert len(bound) == 4 and len({rack(n) for n in bound.values()}) == 1


def _pg(tmp: Path, annotations: dict[str, str], spec_topology: dict[str, object]) -> Path:
    doc = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "annotations": annotations},
        "spec": {"minMember": 1, "networkTopology": spec_topology},
    }
    path = tmp / "pg.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_preferred_tier_in_spec_warns_that_a_cluster_drops_it(tmp_path: Path) -> None:
    path = _pg(tmp_path, {}, {"mode": "hard", "highestTierAllowed": 2, "preferredTierAllowed": 1})
    code, out, err = run("validate", CLUSTER, path)
    text = one_line(out + err)
    assert code == 0, text
    assert "spec.networkTopology.preferredTierAllowed" in text
    assert "topology.tierra.dev/preferred-tier" in text


def test_malformed_tierra_annotations_are_located(tmp_path: Path) -> None:
    ann = {
        "topology.tierra.dev/preferred-tier": "one",
        "topology.tierra.dev/slices": json.dumps([{"tier": 2, "size": 4}, {"tier": 1, "size": 3}]),
    }
    code, out, err = run("validate", CLUSTER, _pg(tmp_path, ann, {"mode": "hard"}))
    text = one_line(out + err)
    assert code == 1
    assert (
        "PodGroup/default/g: metadata.annotations[topology.tierra.dev/preferred-tier]: "
        "must be a non-negative integer" in text
    )
    assert "metadata.annotations[topology.tierra.dev/slices[1].size]: 3 must evenly divide" in text


def _gang(tmp: Path, pod_annotations: dict[str, str], topology: dict[str, object] | None) -> Path:
    spec: dict[str, object] = {"minMember": 1}
    if topology is not None:
        spec["networkTopology"] = topology
    docs = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": spec,
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "g-0",
                "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": "g", **pod_annotations},
            },
            "spec": {"schedulerName": "tierra", "containers": [{"name": "c"}]},
        },
    ]
    path = tmp / "gang.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_a_level_no_node_carries_is_a_located_validate_error(tmp_path: Path) -> None:
    ann = {"kueue.x-k8s.io/podset-required-topology": "cloud.com/no-such-level"}
    code, out, err = run("validate", CLUSTER, _gang(tmp_path, ann, None))
    text = one_line(out + err)
    assert code == 1
    assert (
        "Pod/default/g-0: metadata.annotations[kueue.x-k8s.io/podset-required-topology]: "
        "level 'cloud.com/no-such-level' is a label no node carries" in text
    )


def test_kueue_and_volcano_on_one_gang_warns_which_wins(tmp_path: Path) -> None:
    ann = {"kueue.x-k8s.io/podset-required-topology": "cloud.com/topology-rack"}
    path = _gang(tmp_path, ann, {"mode": "hard", "highestTierAllowed": 2})
    code, out, err = run("validate", CLUSTER, path)
    text = one_line(out + err)
    assert code == 0, text
    assert "the PodGroup's is the gang's limit, Kueue's levels and slices apply inside it" in text
