"""Reading snapshot files as kubectl prints them, and every way they can be wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tierra.api import Phase, load_snapshot
from tierra.errors import InputError, Severity

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"rack": "r1"}},
    "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "3500m", "memory": "16Gi", "nvidia.com/gpu": "8", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ml",
        "annotations": {"scheduling.k8s.io/group-name": "g"},
    },
    "spec": {
        "schedulerName": "tierra",
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "4"}}},
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    },
}


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_multi_document_yaml_and_list_and_json(tmp_path: Path) -> None:
    a = write(
        tmp_path, "a.yaml", yaml.safe_dump_all([NODE, {"apiVersion": "v1", "kind": "ConfigMap"}])
    )
    b = write(tmp_path, "b.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [POD]}))
    snap = load_snapshot([a, b])
    assert [n.name for n in snap.nodes] == ["n1"]
    assert snap.nodes[0].allocatable["cpu"] == 3500
    assert snap.nodes[0].allocatable["memory"] == 16 * 2**30 * 1000
    assert [p.key for p in snap.pods] == ["ml/p"]
    assert snap.problems == ()  # the ConfigMap is skipped silently without --strict


def test_strict_reports_unused_kinds(tmp_path: Path) -> None:
    a = write(
        tmp_path,
        "a.yaml",
        yaml.safe_dump_all(
            [NODE, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}]
        ),
    )
    snap = load_snapshot([a], strict=True)
    assert len(snap.problems) == 1
    assert "ConfigMap" in str(snap.problems[0]) and "document 2" in str(snap.problems[0])


def test_effective_pod_request_follows_kubernetes(tmp_path: Path) -> None:
    snap = load_snapshot([write(tmp_path, "p.yaml", yaml.safe_dump(POD))])
    pod = snap.pods[0]
    # containers 1.5 + sidecar 1 = 2.5 cpu; init peak 4 (before the sidecar) wins; + 0.1 overhead
    assert pod.requests["cpu"] == 4100
    assert pod.requests["nvidia.com/gpu"] == 2000
    assert pod.requests["memory"] == 2**30 * 1000
    assert pod.requests["pods"] == 1000
    assert pod.group_name == "g"
    assert pod.phase is Phase.PENDING and not pod.bound


def test_truncated_yaml_names_file_and_line(tmp_path: Path) -> None:
    text = yaml.safe_dump(NODE)
    p = write(tmp_path, "t.yaml", text[: text.index("allocatable") + 5] + ": [\n")
    with pytest.raises(InputError) as err:
        load_snapshot([p])
    assert "t.yaml: line" in str(err.value)


@pytest.mark.parametrize(
    ("content", "want"),
    [
        (b"\x00\x01binary", "binary file"),
        (b"\xff\xfe\xfa", "not UTF-8"),
        (b"just a string", "expected a Kubernetes object"),
        (b'{"kind": "Node", ', "invalid JSON"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, want: str) -> None:
    p = tmp_path / "f.json"
    p.write_bytes(content)
    with pytest.raises(InputError, match=want):
        load_snapshot([p])


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_snapshot(["/nonexistent/x.yaml"])


def test_field_errors_name_object_and_path(tmp_path: Path) -> None:
    bad = json.loads(json.dumps(NODE))
    bad["status"]["allocatable"]["cpu"] = "lots"
    bad["spec"]["taints"][0]["effect"] = "Sometimes"
    snap = load_snapshot([write(tmp_path, "n.yaml", yaml.safe_dump(bad))])
    texts = [str(p) for p in snap.errors]
    assert any("Node/n1: status.allocatable.cpu" in t and "not a quantity" in t for t in texts)
    assert any("Node/n1: spec.taints[0].effect" in t for t in texts)


def test_duplicate_objects_reported(tmp_path: Path) -> None:
    p = write(tmp_path, "d.yaml", yaml.safe_dump_all([NODE, NODE]))
    snap = load_snapshot([p])
    assert len(snap.nodes) == 1
    assert any("defined twice" in str(e) for e in snap.errors)


def test_fixtures_load(fixtures: Path) -> None:
    crds = fixtures / "k8s-topology-crds"
    snap = load_snapshot(
        [crds / "volcano-hypernodes-tier1-leaf.yaml", crds / "volcano-hypernodes-tier2-tier3.yaml"]
    )
    assert sorted(h.name for h in snap.hypernodes) == [f"s{i}" for i in range(7)]
    assert not snap.errors
    for name in (
        "volcano-hypernode-labelmatch-tiername.yaml",
        "volcano-hypernode-regexmatch.yaml",
        "volcano-job-networktopology-hard.yaml",
        "kueue-tas-sample-gpu-queues.yaml",
        "kueue-tas-sample-job-required.yaml",
    ):
        s = load_snapshot([crds / name])
        assert not s.errors, (name, s.errors)
    gke = load_snapshot([fixtures / "k8s-nodes" / "k8s-node-gke-full-object.yaml"])
    assert len(gke.nodes) == 1 and gke.nodes[0].allocatable["cpu"] > 0
    assert all(p.severity is Severity.ERROR for p in gke.errors)


def test_pod_written_back_reads_the_same(tmp_path: Path) -> None:
    from tierra.api.pod import encode_pod

    pod = dict(POD)
    pod["spec"] = dict(POD["spec"])
    pod["spec"]["nodeSelector"] = {"rack": "r1"}
    pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}
                ]
            }
        }
    }
    first = load_snapshot([write(tmp_path, "a.yaml", yaml.safe_dump(pod))]).pods[0]
    again = load_snapshot([write(tmp_path, "b.yaml", yaml.safe_dump(encode_pod(first)))]).pods[0]
    assert again == first


def test_json_msgspec_refuses_is_still_read_as_json_reads_it(tmp_path: Path) -> None:
    """JSON is decoded with msgspec first; what it refuses (an integer past 64 bits, NaN)
    must still read exactly as Python's json reads it."""
    node = json.loads(json.dumps(NODE))
    node["metadata"]["annotations"] = {"big": "x"}
    node["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 2**70}, "x": float("nan")}
    text = json.dumps({"kind": "List", "items": [node, POD]})
    assert "NaN" in text
    plain = json.dumps({"kind": "List", "items": [NODE, POD]})
    fast = load_snapshot([write(tmp_path, "fast.json", plain)])
    slow = load_snapshot([write(tmp_path, "slow.json", text)])
    assert slow.nodes[0].allocatable == fast.nodes[0].allocatable
    assert slow.pods == fast.pods and not slow.errors
    assert slow.nodes[0].meta.extra == {}  # the odd status fields are not kept


def test_a_resource_list_read_twice_gives_two_dicts_and_bad_amounts_are_still_named(
    tmp_path: Path,
) -> None:
    """Parsed resource lists are remembered; each object still gets its own dict, and an
    amount that is wrong is named wherever it appears."""
    other = json.loads(json.dumps(NODE))
    other["metadata"]["name"] = "n3"
    bad = json.loads(json.dumps(NODE))
    bad["metadata"]["name"] = "n2"
    bad["status"]["allocatable"]["cpu"] = "-1"
    listed = json.dumps({"kind": "List", "items": [NODE, other, bad]})
    snap = load_snapshot([write(tmp_path, "n.json", listed)])
    first, second = snap.nodes[0], snap.nodes[1]
    assert first.allocatable == second.allocatable and first.allocatable is not second.allocatable
    (problem,) = snap.errors
    assert str(problem).endswith("Node/n2: status.allocatable.cpu: must not be negative, got '-1'")
    assert "cpu" not in snap.nodes[2].allocatable


PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 100,
    "globalDefault": False,
}


def test_priority_classes_are_read(tmp_path: Path) -> None:
    bad = {**PRIORITY_CLASS, "metadata": {"name": "broken"}, "value": "urgent"}
    snap = load_snapshot([write(tmp_path, "pc.yaml", yaml.safe_dump_all([PRIORITY_CLASS, bad]))])
    assert [(pc.name, pc.value) for pc in snap.priority_classes] == [("high", 100), ("broken", 0)]
    (error,) = snap.errors
    assert "PriorityClass/broken: value" in str(error) and "expected an integer" in str(error)
