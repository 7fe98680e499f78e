"""Workloads: seeded generation from trace statistics, Kubernetes objects, user files."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest
from sim_helpers import facts

from tierra.api.podgroup import TopologyMode
from tierra.errors import InputError
from tierra.sim.clusters import SimCluster, build_cluster
from tierra.sim.workload_file import (
    check_workload,
    load_workload,
    parse_workload,
    workload_manifest,
)
from tierra.sim.workloads import (
    PARTITION_LABEL,
    TRACES,
    JobKind,
    WorkloadSpec,
    generate,
    job_podgroup,
    job_pods,
)


def test_trace_constants_match_the_fixture(fixtures: Path) -> None:
    rows = {
        r["id"].lower(): r
        for r in csv.DictReader((fixtures / "traces" / "acme-cluster-summary.csv").open())
    }
    for name, t in TRACES.items():
        r = rows[name]
        assert t.mean_gpus == pytest.approx(float(r["avg_gpu_num"]))
        assert t.median_gpus == pytest.approx(float(r["med_gpu_num"]))
        assert t.max_gpus == int(float(r["max_gpu"]))
        assert t.median_run == pytest.approx(float(r["med_run_time_gpu"]))
        assert t.mean_run == pytest.approx(float(r["avg_run_time_gpu"]))


def test_generation_is_seeded_and_hits_the_load(fattree64: SimCluster) -> None:
    f = facts(fattree64)
    a = generate(f, WorkloadSpec(seed=7, hours=6))
    b = generate(f, WorkloadSpec(seed=7, hours=6))
    c = generate(f, WorkloadSpec(seed=8, hours=6))
    assert a.jobs == b.jobs and a.jobs != c.jobs
    offered = a.gpu_seconds / (fattree64.gpus * 6 * 3600)
    assert 0.85 <= offered < 1.5  # stops at the first job past the target
    assert all(0 <= j.arrival <= 6 * 3600 for j in a.jobs)
    assert [j.arrival for j in a.jobs] == sorted(j.arrival for j in a.jobs)


def test_sizes_and_kinds_follow_the_trace(fattree64: SimCluster) -> None:
    w = generate(facts(fattree64), WorkloadSpec(seed=1, hours=48))
    kinds = Counter(j.kind for j in w.jobs)
    singles = kinds[JobKind.SINGLE] / len(w.jobs)
    assert 0.45 < singles < 0.55  # the traces' median job is one GPU
    training = [j for j in w.jobs if j.kind is JobKind.TRAINING]
    assert {j.gpus for j in training} <= {2, 4, 8, 16, 32, 64, 128}  # <= a quarter of 512
    assert all(j.pods == max(1, j.gpus // 8) for j in training)
    gangs = [j for j in training if j.pods > 1]
    assert all(j.topology is not None for j in gangs)
    modes = Counter(j.topology.mode for j in gangs if j.topology)
    assert modes[TopologyMode.HARD] > 0 and modes[TopologyMode.SOFT] > 0
    for j in gangs:
        if j.partition_size:
            assert j.pods % j.partition_size == 0 and j.partition_size <= 8
    inference = [j for j in w.jobs if j.kind is JobKind.INFERENCE]
    assert inference and all([r.name for r in j.roles] == ["prefill", "decode"] for j in inference)


def test_inference_pods_and_podgroup(fattree64: SimCluster) -> None:
    w = generate(facts(fattree64), WorkloadSpec(seed=2, hours=48))
    job = next(j for j in w.jobs if j.kind is JobKind.INFERENCE and j.partitions > 1)
    pods = job_pods(job)
    assert len(pods) == job.pods
    # pods go instance by instance, each instance holding prefill and decode pods
    parts = [int(p.meta.labels[PARTITION_LABEL]) for p in pods]
    assert parts == sorted(parts)
    per_instance = Counter(parts)
    assert set(per_instance.values()) == {job.partition_size}
    assert all(p.meta.annotations["scheduling.k8s.io/group-name"] == job.name for p in pods)
    pg = job_podgroup(job)
    assert pg.min_member == job.pods
    (policy,) = pg.sub_group_policies
    assert policy.match_label_keys == (PARTITION_LABEL,)
    assert policy.sub_group_size == job.partition_size
    assert policy.network_topology is not None and policy.network_topology.highest_tier_allowed == 1


def test_user_workload_roundtrip(tmp_path: Path, fattree64: SimCluster) -> None:
    w = generate(facts(fattree64), WorkloadSpec(seed=4, hours=2))
    again = parse_workload(workload_manifest(w), "w.yaml")
    assert [(j.name, j.pods, j.gpus, j.duration, j.partition_size) for j in again.jobs] == [
        (j.name, j.pods, j.gpus, j.duration, j.partition_size) for j in w.jobs
    ]


GOOD = """
kind: Workload
jobs:
- {name: pretrain, arrival: 0, duration: 2h, pods: 16, gpusPerPod: 8, commShare: 0.4,
   topology: {mode: hard, highestTierName: aggregation},
   partitions: {size: 4, topology: {mode: hard, highestTierAllowed: 1}}}
- name: chat
  kind: inference
  arrival: 90s
  duration: 1d
  roles: [{name: prefill, pods: 2, gpusPerPod: 8}, {name: decode, pods: 4, gpusPerPod: 8}]
  partitions: {size: 3}
"""


def test_user_workload_reads(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(GOOD)
    w = load_workload(f)
    pretrain, chat = w.jobs
    assert (pretrain.duration, chat.arrival, chat.duration) == (7200.0, 90.0, 86400.0)
    assert chat.partitions == 2 and chat.gpus == 48
    assert pretrain.topology is not None and pretrain.topology.highest_tier_name == "aggregation"
    assert not check_workload(w, build_cluster("fattree", 64).index, 512)


def test_negative_duration_and_other_mistakes_name_their_paths(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(
        "kind: Workload\njobs:\n"
        "- {name: a, duration: -5, pods: 2}\n"
        "- {name: b, duration: 10m, pods: 3, partitions: {size: 2}}\n"
        "- {name: a, duration: 1h, commShare: 2}\n"
        "- {name: Bad_Name, duration: soon}\n"
    )
    with pytest.raises(InputError) as err:
        load_workload(f)
    found = {(p.path, p.message) for p in err.value.problems}
    assert ("jobs[0].duration", "must be > 0, got -5") in found
    assert any(path == "jobs[1].partitions.size" for path, _ in found)
    assert any(path == "jobs[2].commShare" for path, _ in found)
    assert any(path == "jobs[3].name" for path, _ in found)
    assert any(path == "jobs[3].duration" for path, _ in found)
    assert all(p.origin is not None and p.origin.file == str(f) for p in err.value.problems)


def test_cluster_checks(tmp_path: Path, fattree64: SimCluster) -> None:
    w = parse_workload(
        {
            "kind": "Workload",
            "jobs": [
                {
                    "name": "x",
                    "duration": 60,
                    "pods": 2,
                    "gpusPerPod": 8,
                    "topology": {"mode": "hard", "highestTierName": "rack"},
                },
                {"name": "y", "duration": 60, "pods": 100, "gpusPerPod": 8},
                {"name": "z", "duration": 60, "pods": 1, "gpusPerPod": 16},
            ],
        },
        "w.yaml",
    )
    problems = check_workload(w, fattree64.index, fattree64.gpus, 8)
    assert [p.path for p in problems] == [
        "jobs[0].topology.highestTierName",
        "jobs[1]",
        "jobs[2].gpusPerPod",
    ]
    assert "no tier named 'rack'" in problems[0].message
    assert "needs 800 GPUs; the cluster has 512" in problems[1].message
    assert "asks for 16 GPUs; the largest node has 8" in problems[2].message
