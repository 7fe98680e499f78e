"""Volcano Job expansion matches what Volcano's job controller creates."""

from __future__ import annotations

from pathlib import Path

import yaml

from tierra.api import load_snapshot

JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: llm, namespace: ml}
spec:
  schedulerName: tierra
  queue: research
  networkTopology: {mode: hard, highestTierAllowed: 2}
  tasks:
  - name: worker
    replicas: 8
    partitionPolicy:
      totalPartitions: 2
      partitionSize: 4
      minPartitions: 1
      networkTopology: {mode: hard, highestTierAllowed: 1}
    template:
      metadata: {labels: {app: llm}}
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "8", nvidia.com/gpu: "8"}}
  - name: ps
    replicas: 1
    template:
      spec:
        containers: [{name: c, resources: {requests: {cpu: "2"}}}]
"""


def test_job_expands_into_podgroup_and_partitioned_pods(tmp_path: Path) -> None:
    p = tmp_path / "job.yaml"
    p.write_text(JOB)
    snap = load_snapshot([p])
    assert not snap.errors
    (pg,) = snap.podgroups
    assert pg.key == "ml/llm"
    assert pg.min_member == 4 + 1  # minPartitions x partitionSize + ps replicas
    assert dict(pg.min_task_member) == {"worker": 4, "ps": 1}
    assert pg.queue == "research"
    (policy,) = pg.sub_group_policies
    assert policy.name == "worker" and policy.match_label_keys == ("volcano.sh/partition-id",)
    assert policy.sub_group_size == 4 and policy.min_sub_groups == 1
    assert policy.network_topology is not None and policy.network_topology.highest_tier_allowed == 1
    assert len(snap.pods) == 9
    workers = [pod for pod in snap.pods if pod.meta.labels["volcano.sh/task-spec"] == "worker"]
    assert [pod.meta.labels["volcano.sh/partition-id"] for pod in workers] == ["0"] * 4 + ["1"] * 4
    assert all(pod.group_name == "llm" and pod.scheduler_name == "tierra" for pod in snap.pods)
    assert workers[0].name == "llm-worker-0" and workers[0].meta.labels["app"] == "llm"
    assert workers[0].requests["nvidia.com/gpu"] == 8000


def test_existing_podgroup_and_pods_win_over_expansion(tmp_path: Path) -> None:
    job = yaml.safe_load(JOB)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llm-worker-0", "namespace": "ml"},
        "spec": {"nodeName": "n1", "containers": []},
        "status": {"phase": "Running"},
    }
    p = tmp_path / "dump.yaml"
    p.write_text(yaml.safe_dump_all([job, pod]))
    snap = load_snapshot([p])
    running = [x for x in snap.pods if x.name == "llm-worker-0"]
    assert len(running) == 1 and running[0].node_name == "n1"
    assert len(snap.pods) == 9


def test_bad_partition_policy_is_reported(tmp_path: Path) -> None:
    job = yaml.safe_load(JOB)
    job["spec"]["tasks"][0]["replicas"] = 7
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(job))
    snap = load_snapshot([p])
    assert any(
        e.path == "spec.tasks[0].replicas" and "totalPartitions" in e.message for e in snap.errors
    )
