"""Sub-groups (subGroupPolicy, partitions): each in its own domain, all in the gang's."""

from __future__ import annotations

from collections import defaultdict

from tests.scheduler.helpers import placed, reasons, run

from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler.testing import canonical, node, pod, podgroup, policy, topology

PART = "volcano.sh/partition-id"
LEAF = {f"node-{i}": f"s{i // 2}" for i in range(8)}
SPINE = {f"node-{i}": "s4" if i < 4 else "s5" for i in range(8)}


def partitioned(
    name: str, parts: int, size: int, *, min_parts: int = 0, gang_tier: int = 2, gpu: int = 4
) -> tuple[PodGroup, list[Pod]]:
    pg = podgroup(
        name,
        max(min_parts, 1) * size if min_parts else parts * size,
        network_topology=topology(tier=gang_tier),
        policies=[policy("p", size=size, min_groups=min_parts, network_topology=topology(tier=1))],
    )
    pods = [
        pod(f"{name}-{i}", group=name, gpu=gpu, labels={PART: str(i // size)})
        for i in range(parts * size)
    ]
    return pg, pods


def by_partition(result_placed: dict[str, str], size: int) -> dict[int, set[str]]:
    out: dict[int, set[str]] = defaultdict(set)
    for key, n in result_placed.items():
        out[int(key.rsplit("-", 1)[1]) // size].add(LEAF[n])
    return out


def test_each_partition_in_one_leaf_and_the_job_in_one_spine() -> None:
    nodes, hns = canonical()
    pg, pods = partitioned("job", 2, 4)  # 4 pods x 4 GPUs = one leaf each
    result = run(nodes, hns, pods, [pg])
    got = placed(result)
    assert len(got) == 8
    parts = by_partition(got, 4)
    assert all(len(leaves) == 1 for leaves in parts.values())
    assert len({SPINE[n] for n in got.values()}) == 1
    assert {b.hypernode for b in result.bindings} == {"s4"}


def test_min_sub_groups_lets_the_gang_start_with_fewer_partitions() -> None:
    nodes, hns = canonical()
    # only s0 is free inside s4; s1, s2, s3 are taken
    running = [pod(f"r{i}", node_name=f"node-{i}", gpu=8) for i in range(2, 8)]
    pg, pods = partitioned("job", 2, 4, min_parts=1)
    result = run(nodes, hns, running + pods, [pg])
    got = placed(result)
    assert len(got) == 4
    assert {LEAF[n] for n in got.values()} == {"s0"}


def test_a_partition_never_spans_two_leaves() -> None:
    nodes, hns = canonical()
    # every leaf has room for 2 of 4 pods only
    running = [pod(f"r{i}", node_name=f"node-{2 * i}", gpu=8) for i in range(4)]
    pg, pods = partitioned("job", 1, 4)
    result = run(nodes, hns, running + pods, [pg])
    assert result.bindings == ()
    reason = reasons(result)["default/job"]
    assert "sub-group p-0" in reason and "no tier-1 HyperNode inside" in reason


def test_soft_sub_group_never_exceeds_its_gangs_limit() -> None:
    nodes, hns = canonical()
    pg = podgroup(
        "job",
        8,
        network_topology=topology(tier=2),
        policies=[policy("p", size=8, network_topology=topology(mode="soft"))],
    )
    pods = [pod(f"job-{i}", group="job", gpu=4, labels={PART: "0"}) for i in range(8)]
    got = placed(run(nodes, hns, pods, [pg]))
    assert {SPINE[n] for n in got.values()} == {"s4"}


def test_prefill_and_decode_share_a_spine_each_role_in_its_own_leaves() -> None:
    nodes, hns = canonical()
    role = "app.kubernetes.io/role"
    pg = podgroup(
        "llm",
        8,
        network_topology=topology(tier=2),
        policies=[
            policy(
                "prefill",
                keys=(role,),
                size=4,
                selector={role: "prefill"},
                network_topology=topology(tier=1),
            ),
            policy(
                "decode",
                keys=(role,),
                size=4,
                selector={role: "decode"},
                network_topology=topology(tier=1),
            ),
        ],
    )
    pods = [pod(f"llm-prefill-{i}", group="llm", gpu=4, labels={role: "prefill"}) for i in range(4)]
    pods += [pod(f"llm-decode-{i}", group="llm", gpu=4, labels={role: "decode"}) for i in range(4)]
    got = placed(run(nodes, hns, pods, [pg]))
    assert len(got) == 8
    prefill = {LEAF[n] for k, n in got.items() if "prefill" in k}
    decode = {LEAF[n] for k, n in got.items() if "decode" in k}
    assert len(prefill) == 1 and len(decode) == 1 and prefill != decode
    assert {SPINE[n] for n in got.values()} == {"s4"}


def test_sub_group_order_follows_the_partition_index() -> None:
    nodes = [node("a"), node("b")]
    pg = podgroup("job", 1, policies=[policy("p", size=1)])
    pods = [pod(f"job-{i}", group="job", gpu=8, labels={PART: str(i)}) for i in (10, 2, 1)]
    got = placed(run(nodes, pods=pods, podgroups=[pg]))
    assert got == {"default/job-1": "a", "default/job-2": "b"}


def test_pods_outside_every_policy_join_the_default_sub_group() -> None:
    nodes, hns = canonical()
    pg = podgroup(
        "job",
        3,
        network_topology=topology(tier=1),
        policies=[policy("p", size=2, selector={"role": "worker"})],
    )
    pods = [
        pod(f"job-w{i}", group="job", gpu=4, labels={"role": "worker", PART: "0"}) for i in range(2)
    ]
    pods.append(pod("job-launcher", group="job", gpu=4))
    got = placed(run(nodes, hns, pods, [pg]))
    assert len(got) == 3
    assert len({LEAF[n] for n in got.values()}) == 1


def test_more_members_of_a_whole_sub_group_stay_in_its_domain() -> None:
    nodes, hns = canonical()
    pg = podgroup(
        "job",
        2,
        network_topology=topology(tier=2),
        policies=[policy("p", size=2, network_topology=topology(tier=1))],
    )
    running = [
        pod(f"job-{i}", group="job", gpu=2, labels={PART: "0"}, node_name="node-2")
        for i in range(2)
    ]
    blocker = pod("other", node_name="node-3", gpu=8)  # s1's other node is full
    late = pod("job-2", group="job", gpu=8, labels={PART: "0"})
    result = run(nodes, hns, [*running, blocker, late], [pg])
    # node-2 (s1) has 4 GPUs left: not enough; the sub-group may not leave s1 (tier 1)
    assert result.bindings == ()
    late_fits = pod("job-2", group="job", gpu=4, labels={PART: "0"})
    got = placed(run(nodes, hns, [*running, blocker, late_fits], [pg]))
    assert got == {"default/job-2": "node-2"}


def test_a_label_value_with_a_superscript_digit_does_not_crash_the_session() -> None:
    # "1²2".isdigit() is true but int("²") fails: sub-group ids sort by api.natural_key
    nodes = [node("a"), node("b"), node("c")]
    pg = podgroup("job", 3, policies=[policy("p", size=1)])
    pods = [
        pod(f"job-{i}", group="job", gpu=8, labels={PART: v})
        for i, v in enumerate(["1²2", "10", "2"])
    ]
    got = placed(run(nodes, pods=pods, podgroups=[pg]))
    assert sorted(got) == ["default/job-0", "default/job-1", "default/job-2"]
