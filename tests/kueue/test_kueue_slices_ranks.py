"""Slices, multi-layer slices, PodSet groups and rank order through ``tierra schedule``.

Placement cases follow Kueue's ``TestFindTopologyAssignments``
(``pkg/cache/scheduler/tas_cache_test.go``), rank cases the topology ungater's
``TestReconcile`` (``pkg/controller/tas/topology_ungater_test.go``), both at v0.19.2."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tests.kueue.kueue_helpers import (
    BLOCK,
    HOST,
    RACK,
    node,
    placed,
    podgroup,
    pods,
    reason,
    schedule,
    write,
)
from tests.run_cli import run

from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule as core_schedule

REQ = "kueue.x-k8s.io/podset-required-topology"
PREF = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP = "kueue.x-k8s.io/podset-group-name"
INDEX = "batch.kubernetes.io/job-completion-index"


def rack(n: str) -> str:
    return "-".join(n.split("-")[:2])


def test_block_required_rack_required_for_slices(tmp_path: Path) -> None:
    """Kueue: "block required for podset; rack required for slices; BestFit": each slice
    of 2 in one rack, the PodSet in one block."""
    nodes = [node("b1-r1-x1", 1), node("b1-r1-x2", 1), node("b1-r2-x3", 1), node("b1-r2-x4", 1)]
    nodes += [node("b2-r1-x5", 3)]
    ann = {REQ: BLOCK, SLICE: RACK, SIZE: "2"}
    result = schedule(tmp_path, nodes, [podgroup("j", 4), *pods("j", 4, ann)])
    bound = placed(result)
    assert len(bound) == 4 and {n.split("-")[0] for n in bound.values()} == {"b1"}
    slices = [{rack(bound[f"j-{i}"]), rack(bound[f"j-{i + 1}"])} for i in (0, 2)]
    assert all(len(s) == 1 for s in slices)


def test_slices_do_not_fit_in_racks(tmp_path: Path) -> None:
    """Kueue: "block required for podset; rack required for slices; podset fits in a
    block, but slices do not fit in racks": not bound, with a reason."""
    nodes = [node("b1-r1-x3", 2), node("b1-r2-x5", 2), node("b1-r3-x1", 2)]
    ann = {REQ: BLOCK, SLICE: RACK, SIZE: "3"}
    result = schedule(tmp_path, nodes, [podgroup("j", 6), *pods("j", 6, ann)])
    assert result["bindings"] == []
    assert "slice" in reason(result, "j")


def test_slice_size_is_required_when_slice_topology_is_requested(tmp_path: Path) -> None:
    """Kueue: "slice size is required when slice topology is requested": a located error
    from validate, and a pending reason from schedule."""
    nodes = [node("b1-r1-x1", 4)]
    files = write(tmp_path, nodes, [podgroup("j", 2), *pods("j", 2, {REQ: BLOCK, SLICE: RACK})])
    code, out, err = run("validate", *files)
    assert code == 1
    assert f"Pod/default/j-0: metadata.annotations[{SIZE}]: must be set" in " ".join(
        (out + err).split()
    )
    code, _, err = run("schedule", *files)
    assert code == 2 and f"metadata.annotations[{SIZE}]" in err  # bad input: refused
    # a pod that reached the scheduler anyway (no webhook) waits, with the same words
    result = core_schedule(load_snapshot(files))
    (why,) = [u.status.reason for u in result.unschedulable]
    assert f"pod default/j-0: metadata.annotations[{SIZE}]: must be set" in why


def test_malformed_annotations_are_located_errors(tmp_path: Path) -> None:
    """Kueue's ``tas_validation.go``: a slice size that is not a positive number, layers
    that do not parse or nest deeper than three."""
    bad = {
        "a": {SLICE: RACK, SIZE: "0"},
        "b": {SLICE: RACK, SIZE: "two"},
        "c": {LAYERS: "[{"},
        "d": {LAYERS: json.dumps([{"topology": f"l{i}", "size": 1} for i in range(4)])},
    }
    objs = [o for job, ann in bad.items() for o in (podgroup(job, 1), *pods(job, 1, ann))]
    files = write(tmp_path, [node("b1-r1-x1", 4)], objs)
    code, out, err = run("validate", *files)
    text = " ".join((out + err).split())
    assert code == 1
    assert (
        f"Pod/default/a-0: metadata.annotations[{SIZE}]: must be greater than or equal to 1" in text
    )
    assert f"Pod/default/b-0: metadata.annotations[{SIZE}]: must be a numeric value" in text
    assert f"Pod/default/c-0: metadata.annotations[{LAYERS}]: must be a valid JSON array" in text
    assert "between 1 and 3 entries (got 4)" in text
    result = core_schedule(load_snapshot(files))
    assert not result.bindings
    assert {u.podgroup for u in result.unschedulable} == {f"default/{j}" for j in bad}


def test_multi_layer_inner_layer_groups_stay_together(tmp_path: Path) -> None:
    """Kueue's multi-layer slices (``buildSliceSizeAtLevel``): 4 pods per block, inside
    it groups of 2 per rack; racks of 3 free cpus must not take 3 of one slice."""
    nodes = [node("b1-r1-x1", 3), node("b1-r2-x2", 3), node("b2-r1-x3", 1)]
    layers = json.dumps([{"topology": BLOCK, "size": 4}, {"topology": RACK, "size": 2}])
    result = schedule(tmp_path, nodes, [podgroup("j", 4), *pods("j", 4, {LAYERS: layers})])
    per_rack = Counter(rack(n) for n in placed(result).values())
    assert sorted(per_rack.values()) == [2, 2], result


def test_ranks_fill_slots_in_kueue_order_for_batch_job(tmp_path: Path) -> None:
    """Ungater: "ranks: ungate pods according to their ranks for batch/Job - for all
    Pods": rank r takes the r-th slot, domains in order of their level values."""
    nodes = [node("b1-r1-x1", 2), node("b1-r2-x2", 1), node("b2-r1-x3", 2)]
    labels = [{INDEX: str(4 - i)} for i in range(5)]  # names and ranks disagree
    result = schedule(
        tmp_path, nodes, [podgroup("j", 5), *pods("j", 5, {PREF: BLOCK}, labels=labels)]
    )
    bound = placed(result)
    by_rank = {4 - i: bound[f"j-{i}"] for i in range(5)}
    assert by_rank == {
        0: "b1-r1-x1",
        1: "b1-r1-x1",
        2: "b1-r2-x2",
        3: "b2-r1-x3",
        4: "b2-r1-x3",
    }


def test_repeated_ranks_fall_back_to_pod_order(tmp_path: Path) -> None:
    """Ungater: "ranks: gracefully handle situation with repeated ranks": pod order."""
    nodes = [node("b1-r1-x1", 2), node("b1-r2-x2", 1), node("b2-r1-x3", 2)]
    labels = [{INDEX: "0"} for _ in range(5)]
    result = schedule(
        tmp_path, nodes, [podgroup("j", 5), *pods("j", 5, {PREF: BLOCK}, labels=labels)]
    )
    assert len(placed(result)) == 5


def test_ranks_for_jobset(tmp_path: Path) -> None:
    """Ungater: "ranks: support rank-based ordering for JobSet - for all Pods": rank =
    completion index + job index * pods per Job."""
    nodes = [node("b1-r1-x1", 2), node("b1-r2-x2", 2)]
    labels = [
        {INDEX: str(c), "jobset.sigs.k8s.io/job-index": str(j)} for j in (1, 0) for c in (1, 0)
    ]
    result = schedule(
        tmp_path, nodes, [podgroup("j", 4), *pods("j", 4, {REQ: BLOCK}, labels=labels)]
    )
    bound = placed(result)
    rank = {
        f"j-{i}": int(lb["jobset.sigs.k8s.io/job-index"]) * 2 + int(lb[INDEX])
        for i, lb in enumerate(labels)
    }
    slots = sorted(bound.values())
    assert {p: slots[r] for p, r in rank.items()} == bound


def test_leader_and_workers_in_one_domain(tmp_path: Path) -> None:
    """Kueue: "find topology assignment for two podsets with the same group": a
    LeaderWorkerSet's leader PodSet and its workers in one rack, leader rank 0."""
    nodes = [node("b1-r1-x1", 1), node("b1-r2-x2", 2), node("b1-r2-x3", 1), node("b2-r1-x4", 2)]
    ann = {REQ: RACK, GROUP: "lws"}
    lws = "leaderworkerset.sigs.k8s.io/worker-index"
    objs = [
        podgroup("j", 3),
        *pods("j", 1, ann, podset="leader", labels=[{lws: "0"}]),
        *pods("j", 2, ann, podset="workers", labels=[{lws: "1"}, {lws: "2"}]),
    ]
    bound = placed(schedule(tmp_path, nodes, objs))
    assert len(bound) == 3 and {rack(n) for n in bound.values()} == {"b1-r2"}


def test_a_group_of_one_podset_is_refused(tmp_path: Path) -> None:
    """Kueue's ``ValidatePodSetGroupingTopology``: groups of exactly 2 PodSets."""
    nodes = [node("b1-r1-x1", 4)]
    objs = [podgroup("j", 2), *pods("j", 2, {REQ: RACK, GROUP: "g"}, podset="workers")]
    files = write(tmp_path, nodes, objs)
    code, out, err = run("validate", *files)
    assert code == 1
    assert f"metadata.annotations[{GROUP}]: can only define groups of exactly 2 PodSets" in (
        " ".join((out + err).split())
    )
    result = core_schedule(load_snapshot(files))
    (why,) = [u.reason for u in result.unschedulable]
    assert "exactly 2 PodSets" in why


def test_host_slices_without_a_podset_level(tmp_path: Path) -> None:
    """Kueue: "no topology for podset; host required for slices; BestFit"."""
    nodes = [node("b1-r1-x1", 2), node("b1-r1-x2", 2)]
    result = schedule(tmp_path, nodes, [podgroup("j", 4), *pods("j", 4, {SLICE: HOST, SIZE: "2"})])
    bound = placed(result)
    assert bound["j-0"] == bound["j-1"] and bound["j-2"] == bound["j-3"]
