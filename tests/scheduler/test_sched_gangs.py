"""Gangs: all or nothing, members beyond minMember, minResources, minTaskMember, bad input."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.helpers import domains, placed, reasons, run

from tierra.api.meta import ObjectMeta
from tierra.scheduler import SchedulerConfig
from tierra.scheduler.testing import (
    canonical,
    gang,
    node,
    pod,
    podgroup,
    policy,
    queue,
    topology,
)


def test_a_gang_that_does_not_fit_whole_binds_nothing() -> None:
    nodes = [node("a"), node("b")]
    pg, pods = gang("job", 3, gpu=8)
    result = run(nodes, pods=pods, podgroups=[pg])
    assert result.bindings == ()
    assert "default/job" in reasons(result)


def test_members_beyond_min_member_are_placed_when_they_fit() -> None:
    nodes = [node("a"), node("b"), node("c")]
    pg, pods = gang("job", 5, min_member=2, gpu=8)
    result = run(nodes, pods=pods, podgroups=[pg])
    assert len(result.bindings) == 3  # the gang ran with 2, one more fitted
    assert reasons(result) == {}


def test_min_member_counts_running_pods() -> None:
    nodes = [node("a"), node("b")]
    pg = podgroup("job", 2)
    running = pod("job-0", group="job", gpu=8, node_name="a")
    pending = pod("job-1", group="job", gpu=8)
    result = run(nodes, pods=[running, pending], podgroups=[pg])
    assert placed(result) == {"default/job-1": "b"}


def test_min_resources_must_fit_in_one_allowed_domain() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 1, network_topology=topology(tier=1), gpu=1)
    pg = replace(pg, min_resources={"nvidia.com/gpu": 24000})  # more than a leaf has
    result = run(nodes, hns, pods, [pg])
    assert result.bindings == ()
    reason = reasons(result)["default/job"]
    assert "no tier-1 HyperNode" in reason


def test_min_task_member_picks_pods_of_each_task() -> None:
    nodes = [node("a"), node("b")]
    pg = podgroup("job", 2, min_task_member={"ps": 1, "worker": 1})
    ann = "volcano.sh/task-spec"
    pods = [
        pod("job-worker-0", group="job", gpu=8, annotations={ann: "worker"}),
        pod("job-worker-1", group="job", gpu=8, annotations={ann: "worker"}),
        pod("job-ps-0", group="job", cpu=1, gpu=0, annotations={ann: "ps"}),
    ]
    result = run(nodes, pods=pods, podgroups=[pg])
    # minMember 2 could be met by two workers; minTaskMember needs the ps too
    assert "default/job-ps-0" in placed(result)
    assert len(result.bindings) == 3


def test_missing_queue_is_a_reason() -> None:
    nodes = [node("a")]
    pg, pods = gang("job", 1, queue_name="nope")
    result = run(nodes, pods=pods, podgroups=[pg], queues=[queue("research")])
    assert reasons(result)["default/job"] == (
        "queue 'nope' does not exist (queues: default, research)"
    )


def test_pod_naming_a_missing_podgroup_is_a_reason() -> None:
    result = run([node("a")], pods=[pod("p-0", group="ghost"), pod("p-1", group="ghost")])
    assert result.bindings == ()
    assert reasons(result)["default/ghost"] == (
        "PodGroup default/ghost does not exist; pod default/p-0 and 1 more name it in "
        "annotation scheduling.k8s.io/group-name"
    )


def test_min_member_larger_than_the_pods_is_a_reason() -> None:
    pg, pods = gang("job", 2, min_member=5)
    result = run([node("a")], pods=pods, podgroups=[pg])
    assert reasons(result)["default/job"] == (
        "minMember is 5 but the gang has only 2 pods (2 pending, 0 running)"
    )


def test_sub_group_policy_without_match_label_keys_is_a_reason() -> None:
    pg = podgroup("job", 2, policies=[policy("workers", keys=())])
    pods = [pod(f"job-{i}", group="job") for i in range(2)]
    reason = reasons(run([node("a")], pods=pods, podgroups=[pg]))["default/job"]
    assert reason.startswith("spec.subGroupPolicy[0] (workers) has no matchLabelKeys")


def test_only_pods_of_our_scheduler_names() -> None:
    nodes = [node("a")]
    theirs = pod("v", scheduler="volcano")
    assert run(nodes, pods=[theirs]).bindings == ()
    config = SchedulerConfig().with_scheduler_names(("tierra", "volcano"))
    assert placed(run(nodes, pods=[theirs], config=config)) == {"default/v": "a"}


def test_a_pod_without_a_podgroup_is_its_own_gang_with_annotation_topology() -> None:
    nodes, hns = canonical()
    ann = {
        "volcano.sh/network-topology-mode": "hard",
        "volcano.sh/network-topology-highest-tier": "1",
    }
    result = run(nodes, hns, pods=[pod("alone", gpu=8, annotations=ann)])
    assert domains(result) == {"default/alone": "s0"}


def test_other_namespaces_keep_their_groups_apart() -> None:
    nodes = [node("a"), node("b")]
    pg_a = podgroup("job", 1, namespace="team-a")
    pg_b = replace(podgroup("job", 1), meta=ObjectMeta(name="job", namespace="team-b"))
    pods = [
        pod("p", group="job", namespace="team-a", gpu=8),
        pod("p", group="job", namespace="team-b", gpu=8),
    ]
    result = run(nodes, pods=pods, podgroups=[pg_a, pg_b])
    assert set(placed(result)) == {"team-a/p", "team-b/p"}


def test_min_member_zero_still_keeps_a_hard_gang_within_its_tier() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 3, min_member=0, network_topology=topology(tier=1), gpu=8)
    result = run(nodes, hns, pods, [pg])
    assert len(result.bindings) == 2  # one leaf's worth; the third fits in no leaf beside them
    assert set(domains(result).values()) == {"s0"}
