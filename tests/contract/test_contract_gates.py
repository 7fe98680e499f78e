"""Scheduling gates (kube-scheduler's SchedulingGates plugin): a gated pod is never bound.

Follows ``pkg/scheduler/framework/plugins/schedulinggates/scheduling_gates_test.go``
(``TestPreEnqueue``: a pod with gates is refused before it is queued, one without passes)
and ``test/integration/scheduler/queueing`` (``TestSchedulingGates``: removing the last
gate makes the pod schedulable). For a gang, a gated pod counts as not yet created.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from tests.run_cli import run as tierra

from tierra.api.pod import decode_pod
from tierra.errors import Problem
from tierra.scheduler import ClusterStore, SchedulerConfig, run_session
from tierra.scheduler.testing import gang, node, pod

CONFIG = SchedulerConfig()


def _pod_doc(name: str, gates: list[str], group: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {
        "schedulerName": "tierra",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
}


def _schedule(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 0, err
    return json.loads(out), err


def test_pre_enqueue_a_gated_pod_is_not_bound(tmp_path: Path) -> None:
    """TestPreEnqueue: "pod with scheduling gates" is refused, "pod without" passes."""
    doc, err = _schedule(
        tmp_path, [NODE, _pod_doc("gated", ["example.com/wait"]), _pod_doc("free", [])]
    )
    assert [b["pod"] for b in doc["bindings"]] == ["default/free"]
    assert "default/gated" in err and "example.com/wait" in err  # said, not silently skipped


def test_decoding_keeps_every_gate_and_names_a_nameless_one() -> None:
    sink: list[Problem] = []
    raw = _pod_doc("p", ["a", "b"])
    raw["spec"]["schedulingGates"].append({})
    p = decode_pod(raw, None, sink)
    assert p.scheduling_gates == ("a", "b", "")
    assert [x.path for x in sink] == ["spec.schedulingGates[2].name"]


def test_removing_the_last_gate_makes_the_pod_schedulable_in_the_next_session() -> None:
    """TestSchedulingGates (integration): gates removed one by one; bound after the last."""
    cache = ClusterStore()
    with cache.batch():
        cache.upsert_node(node("n1"))
        cache.upsert_pod(replace(pod("p"), scheduling_gates=("a", "b")))
    assert run_session(cache, CONFIG).bindings == ()
    cache.upsert_pod(replace(pod("p"), scheduling_gates=("b",)))
    assert run_session(cache, CONFIG).bindings == ()
    cache.upsert_pod(pod("p"))
    assert [(b.pod, b.node) for b in run_session(cache, CONFIG).bindings] == [("default/p", "n1")]


def test_a_gated_member_counts_as_not_yet_created_for_its_gang() -> None:
    pg, pods = gang("job", 3)
    held = [*pods[:2], replace(pods[2], scheduling_gates=("kueue.x-k8s.io/topology",))]
    cache = ClusterStore()
    with cache.batch():
        cache.upsert_node(node("n1"))
        cache.upsert_podgroup(pg)
        for p in held:
            cache.upsert_pod(p)
    result = run_session(cache, CONFIG)
    assert result.bindings == ()
    (waiting,) = result.unschedulable
    assert "minMember is 3 but the gang has only 2 pods" in waiting.reason
    assert "1 more held by schedulingGates" in waiting.reason
    cache.upsert_pod(pods[2])  # the gate is lifted: the whole gang goes at once
    assert sorted(b.pod for b in run_session(cache, CONFIG).bindings) == [p.key for p in pods]


def test_a_gang_beyond_min_member_places_its_ungated_pods_only() -> None:
    pg, pods = gang("job", 3, min_member=2)
    cache = ClusterStore()
    with cache.batch():
        cache.upsert_node(node("n1"))
        cache.upsert_podgroup(pg)
        for p in (*pods[:2], replace(pods[2], scheduling_gates=("g",))):
            cache.upsert_pod(p)
    assert sorted(b.pod for b in run_session(cache, CONFIG).bindings) == [
        pods[0].key,
        pods[1].key,
    ]
