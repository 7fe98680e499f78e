"""Kueue's plain pod groups are gangs (``pkg/controller/jobs/pod/`` at v0.19.2): pods
named into a group by ``kueue.x-k8s.io/pod-group-name`` with
``kueue.x-k8s.io/pod-group-total-count`` are placed all or nothing, ``minMember`` the
count, with Kueue's topology annotations applying; malformed keys are located errors
(``validatePodGroupMetadata`` of ``pod_webhook.go`` and of ``pod_controller.go``).

The cluster is Kueue's TAS e2e cluster (``kind-cluster-tas.yaml``: eight workers in two
blocks of two racks, one ``example.com/gpu`` each), through ``tierra schedule``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.kueue.kueue_helpers import (
    KIND_BLOCK,
    KIND_LEVELS,
    KIND_RACK,
    group_pod,
    indexed_group,
    kind_workers,
    placed,
    podgroup,
    reason,
    schedule,
    write,
)
from tests.run_cli import run

from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule as core_schedule

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
FAST = "kueue.x-k8s.io/pod-group-fast-admission"


def go(
    tmp: Path, objects: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return schedule(tmp, nodes or kind_workers(), objects, levels=KIND_LEVELS)


def explain_text(tmp: Path, objects: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> str:
    code, out, err = run("explain", "default/job", *write(tmp, nodes, objects, KIND_LEVELS))
    assert code == 0, err
    return " ".join(out.split())


def block(node: str) -> str:
    i = 1 if node == "kind-worker" else int(node.removeprefix("kind-worker"))
    return f"b{(i - 1) // 4 + 1}"


def validate(tmp: Path, objects: list[dict[str, Any]]) -> tuple[int, str]:
    code, out, err = run("validate", *write(tmp, kind_workers(), objects, KIND_LEVELS))
    return code, " ".join((out + err).split())


def test_a_pod_group_with_a_required_block_is_one_gang_in_rank_order(tmp_path: Path) -> None:
    """Kueue e2e ``TopologyAwareScheduling for Pod group``, "Should place pods based on
    the ranks-ordering": four pods of ``MakeIndexedGroup(4)``, block required: index i
    on the i-th worker of block b1."""
    result = go(tmp_path, indexed_group("test-pod", 4, {REQUIRED: KIND_BLOCK}))
    got = placed(result)
    want = ["kind-worker", "kind-worker2", "kind-worker3", "kind-worker4"]
    assert got == {f"test-pod-{i}": n for i, n in enumerate(want)}
    assert not result["unschedulable"]


def test_a_pod_group_without_a_topology_annotation_is_still_a_gang(tmp_path: Path) -> None:
    """Kueue e2e, "Should schedule Pods without explicit TAS annotation": four pods, one
    GPU each, all bound; here a gang (all or nothing) on four workers."""
    got = placed(go(tmp_path, indexed_group("test-pod", 4)))
    assert len(got) == 4 and len(set(got.values())) == 4


def test_all_or_nothing_the_count_is_the_minimum(tmp_path: Path) -> None:
    """Nine one-GPU pods on eight GPUs: none is bound (Kueue admits the group's Workload
    whole or not at all), and the reason says what the gang needs."""
    result = go(tmp_path, indexed_group("big", 9))
    assert not result["bindings"]
    assert "9" in reason(result, "big")


def test_a_group_waits_until_its_pods_exist(tmp_path: Path) -> None:
    """``validatePodGroupMetadata``: fewer runnable pods than the count composes no
    Workload; here the gang waits with Kueue's words, which validate reports on the pod
    (as it reports a Volcano PodGroup whose minMember is above its pods)."""
    pods = indexed_group("part", 4)[:3]
    result = go(tmp_path, pods)
    assert not result["bindings"]
    assert "'part' group has fewer runnable pods than expected (3 of" in reason(result, "part")
    code, text = validate(tmp_path, pods)
    assert code == 1
    assert "Pod/default/part-0: 'part' group has fewer runnable pods than expected" in text


def test_a_failed_pod_is_not_runnable(tmp_path: Path) -> None:
    """``isPodRunnableOrSucceeded``: a Failed pod does not count toward the group."""
    pods = indexed_group("f", 3)
    pods[0]["status"] = {"phase": "Failed"}
    result = go(tmp_path, pods)
    assert not result["bindings"]
    assert "(2 of kueue.x-k8s.io/pod-group-total-count 3)" in reason(result, "f")


def test_fast_admission_places_the_pods_present_where_the_group_fits(tmp_path: Path) -> None:
    """``pod-group-fast-admission: "true"``: Kueue admits the group with the pods it has,
    holding room for the whole count. Two of four pods exist, block required, and block
    b1 has three free GPUs (another scheduler's pod holds kind-worker2): the two pods are
    bound now, in b2, whose free room holds all four (``minResources``); without fast
    admission the group waits for its other two pods."""
    other = group_pod("other", None, None)
    other["spec"] = {**other["spec"], "nodeName": "kind-worker2", "schedulerName": "other"}
    ann = {REQUIRED: KIND_BLOCK, FAST: "true"}
    got = placed(go(tmp_path, [other, *indexed_group("fast", 4, ann)[:2]]))
    assert len(got) == 2
    assert {block(n) for n in got.values()} == {"b2"}
    slow = indexed_group("slow", 4, {REQUIRED: KIND_BLOCK})[:2]
    assert not placed(go(tmp_path, [other, *slow]))


def test_malformed_keys_are_located_errors(tmp_path: Path) -> None:
    """Kueue's pod webhook: a name without a count and a count without a name, a count
    that is not an integer or is below 1, a name that is not a DNS subdomain; its
    reconciler: an index at or above the count, counts that differ."""
    objs = [
        group_pod("a-0", "a", None),
        group_pod("b-0", None, "2"),
        group_pod("c-0", "c", "two"),
        group_pod("d-0", "d", "0"),
        group_pod("e-0", "E_bad", "1"),
        group_pod("f-0", "f", "2", index=2),
        group_pod("g-0", "g", "2"),
        group_pod("g-1", "g", "3"),
    ]
    code, text = validate(tmp_path, objs)
    assert code == 1
    label = "metadata.labels[kueue.x-k8s.io/pod-group-name]"
    count = "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"
    assert f"Pod/default/a-0: {count}: both the 'kueue.x-k8s.io/pod-group-total-count'" in text
    assert f"Pod/default/b-0: {label}: both the" in text
    assert f"Pod/default/c-0: {count}: must be an integer, got 'two'" in text
    assert f"Pod/default/d-0: {count}: group total count should be greater than zero" in text
    assert f"Pod/default/e-0: {label}: must be a name Kueue can give its Workload" in text
    assert (
        "Pod/default/f-0: metadata.labels[kueue.x-k8s.io/pod-group-pod-index]: value should "
        "be less than 2" in text
    )
    assert "pods of group default/g have different counts: 2, 3" in text
    files = write(tmp_path, kind_workers(), objs, KIND_LEVELS)
    result = core_schedule(load_snapshot(files))
    assert not result.bindings
    why = {u.podgroup: u.reason for u in result.unschedulable}
    assert f"pod default/c-0: {count}: must be an integer" in why["default/c"]
    assert "pods default/g-0 and default/g-1 have different" in why["default/g"]
    assert "value should be less than 2" in why["default/f"]


def test_a_podgroup_object_of_the_same_name_wins_and_validate_warns(tmp_path: Path) -> None:
    """The PodGroup object is the gang tierra implements exactly: its minMember counts,
    the pods' total count is not read (and validate says so)."""
    objs = [podgroup("pg", 2), *indexed_group("pg", 4)[:2]]
    assert len(placed(go(tmp_path, objs))) == 2  # minMember 2, though the count says 4
    code, text = validate(tmp_path, objs)
    assert code == 0
    assert "the pod joins PodGroup default/pg, which is the gang" in text


def test_roles_are_podsets_a_leader_and_its_workers(tmp_path: Path) -> None:
    """Pods of a group fall into PodSets by role (Kueue's ``role-hash``, else the shape of
    the spec): a leader asking more cpu and three workers, joined by
    ``podset-group-name``, are one unit under their level: a required rack (two GPUs)
    cannot hold the four, a required block can."""

    def pods(level: str) -> list[dict[str, Any]]:
        ann = {"kueue.x-k8s.io/podset-group-name": "lw", REQUIRED: level}
        leader = group_pod("lw-0", "lw", "4", annotations=ann)
        for part in ("requests", "limits"):
            leader["spec"]["containers"][0]["resources"][part]["cpu"] = "2"
        return [leader, *(group_pod(f"lw-{i}", "lw", "4", annotations=ann) for i in (1, 2, 3))]

    assert not placed(go(tmp_path, pods(KIND_RACK)))
    got = placed(go(tmp_path, pods(KIND_BLOCK)))
    assert len(got) == 4 and len({block(n) for n in got.values()}) == 1


def test_the_role_is_kueues_role_hash_when_written() -> None:
    """Kueue's webhook writes ``kueue.x-k8s.io/role-hash``; tierra reads it, else hashes
    the spec's shape, so equal templates share a role and different ones do not."""
    from tierra.api.kueue_pod_group import role_of
    from tierra.api.pod import decode_pod

    def pod(cpu: str, ann: dict[str, str] | None = None) -> Any:
        raw = group_pod("p", "g", "2", annotations=ann)
        raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        return decode_pod(raw, None, [])

    assert role_of(pod("1")) == role_of(pod("1")) != role_of(pod("2"))
    assert role_of(pod("1", {"kueue.x-k8s.io/role-hash": "abcd1234"})) == "abcd1234"


def test_podsets_of_one_level_are_placed_each_in_its_own_domain(tmp_path: Path) -> None:
    """Kueue e2e jobset_test "should admit a JobSet with two ReplicatedJobs": two one-pod
    PodSets, each hostname required, on kind-worker and kind-worker2 (one host each; one
    host could not hold both)."""
    pods = []
    for rj in ("rj1", "rj2"):
        pod = group_pod(f"g-{rj}", "g", "2", annotations={REQUIRED: "kubernetes.io/hostname"})
        pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] = rj
        pods.append(pod)
    assert placed(go(tmp_path, pods)) == {"g-rj1": "kind-worker", "g-rj2": "kind-worker2"}


def test_a_grouped_leader_takes_rank_zero_and_its_workers_the_next(tmp_path: Path) -> None:
    """Kueue e2e leaderworkerset_test "creating a LeaderWorkerSet with leader grouped with
    workers with the same resource requests": the leader (role ``leader``, worker index 0)
    and three workers (role ``worker``, indexes 1..3) of one group, grouped by
    ``podset-group-name``, block required: index i on the i-th worker of block b1 (the
    workers' ranks follow the leader's in the group's rank space)."""
    ann = {REQUIRED: KIND_BLOCK, "kueue.x-k8s.io/podset-group-name": "g"}
    pods = []
    for w in (3, 1, 0, 2):  # created in no particular order
        role = "leader" if w == 0 else "worker"
        pod = group_pod(
            f"lws-{w}", "lws", "4", annotations={**ann, "kueue.x-k8s.io/role-hash": role}
        )
        pod["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"] = str(w)
        pods.append(pod)
    want = ["kind-worker", "kind-worker2", "kind-worker3", "kind-worker4"]
    assert placed(go(tmp_path, pods)) == {f"lws-{w}": want[w] for w in range(4)}


def test_a_replacement_avoids_a_node_its_pods_tolerate_only_for_a_while(tmp_path: Path) -> None:
    """Kueue e2e hotswap_test "Should replace a node when it becomes tainted with NoExecute
    and tolerationSeconds" (``checkTaintTolerations``: a temporarily tolerated taint marks
    the node for replacement): a group of three, block required, two running on
    kind-worker2 and kind-worker3, kind-worker tainted NoExecute and tolerated for 0 s:
    the replacement goes to kind-worker4. A new gang with the same toleration may use
    kind-worker (tolerated, as kube-scheduler tolerates it): eight pods take all eight."""
    nodes = kind_workers()
    nodes[0]["spec"] = {"taints": [{"key": "key1", "value": "value1", "effect": "NoExecute"}]}
    toleration = {"key": "key1", "operator": "Equal", "value": "value1",
                  "effect": "NoExecute", "tolerationSeconds": 0}  # fmt: skip
    pods = indexed_group("job", 3, {REQUIRED: KIND_BLOCK})
    for pod, node in zip(pods, ("kind-worker2", "kind-worker3", None), strict=True):
        pod["spec"]["tolerations"] = [toleration]
        if node:
            pod["spec"]["nodeName"] = node
            pod["status"] = {"phase": "Running"}
    assert placed(go(tmp_path, pods, nodes)) == {"job-2": "kind-worker4"}
    other = group_pod("other", None, None)
    other["spec"] = {**other["spec"], "nodeName": "kind-worker4", "schedulerName": "other"}
    result = go(tmp_path, [*pods, other], nodes)  # the block's one free node is the tainted one
    assert not result["bindings"]
    assert "tolerate only for a while" in explain_text(tmp_path, [*pods, other], nodes)
    fresh = indexed_group("new", 8)
    for pod in fresh:
        pod["spec"]["tolerations"] = [toleration]
    assert "kind-worker" in placed(go(tmp_path, fresh, nodes)).values()


def test_preemption_takes_a_running_pod_group_whole(tmp_path: Path) -> None:
    """A running Kueue pod group is a gang for preemption too (Kueue preempts Workloads
    whole): eight low-priority pods of one group hold every GPU; a high-priority group of
    four that needs room evicts all eight (its gang would be broken by losing four), not
    just the four it needs, as for a PodGroup's pods."""
    low = indexed_group("low", 8)
    for i, pod in enumerate(low):
        pod["spec"]["nodeName"] = kind_workers()[i]["metadata"]["name"]
        pod["status"] = {"phase": "Running"}
    high = indexed_group("high", 4, {REQUIRED: KIND_BLOCK})
    for pod in high:
        pod["spec"]["priority"] = 100
    result = go(tmp_path, [*low, *high])
    evicted = {e["pod"] for e in result["evictions"]}
    assert evicted == {f"default/low-{i}" for i in range(8)}, result["evictions"]
