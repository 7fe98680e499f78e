"""Sub-groups exactly as Volcano defines them, one test per rule.

Read in volcano-sh/volcano at ed72c7c8 (master, 2026-08-20):

* ``pkg/scheduler/api/job_info.go``: ``JobInfo.IsReady`` is ``ReadyTaskNum() +
  PendingBestEffortTaskNum() >= MinAvailable`` over *every* task of the job, whatever
  its subJob; ``checkSubJobCondition`` counts, per policy (GID), every subJob in
  ``ji.SubJobs`` that satisfies ``IsReady`` -- pending or not.
* ``pkg/scheduler/api/sub_job_info.go``: ``SubJobInfo.IsReady`` is ``ReadyTaskNum() >=
  MinAvailable`` (``subGroupSize``), ``ReadyTaskNum`` counting Bound, Binding, Running,
  Allocated and Succeeded tasks: running pods make a sub-group ready.
* ``pkg/scheduler/actions/allocate/allocate.go``: ``organizeJobWorksheet`` counts the
  subJobs already ready (``subJobCountMap[subJob.GID]++``) before it marks the ones still
  required for ``minSubGroups``; ``allocateForJob`` pushes a subJob back while it has
  pending tasks (``if !subJobWorksheet.Empty() { jobWorksheetCopy.subJobs.Push(subJob) }``)
  and stops at ``ssn.JobReady(job)``, so tasks beyond ``subGroupSize`` are allocated and
  count toward the job's ``minMember``.
* ``pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go``: the subJob
  gradient starts at ``getSearchRoot(hyperNodes, hyperNodeForJob, highestAllowedTier,
  subJob.AllocatedHyperNode)``: the highest HyperNode the subJob's tier allows above its
  allocated one, intersected with the job's HyperNode, else the error "there is no
  intersection between hyperNodeAvailable ... and hyperNodeHighestAllowed ..." and no
  gradient (the subJob is not allocated).
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.scheduler.helpers import placed, reasons, run

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, run_session
from tierra.scheduler.testing import (
    canonical,
    hypernode,
    node,
    pod,
    podgroup,
    policy,
    snapshot,
    topology,
)
from tierra.topology.index import TopologyIndex

PART = "volcano.sh/partition-id"
LEAF = {f"node-{i}": f"s{i // 2}" for i in range(8)}


def member(gang: str, i: int, part: int | str, *, gpu: int = 4, on: str = "") -> Pod:
    return pod(f"{gang}-{i}", group=gang, gpu=gpu, labels={PART: str(part)}, node_name=on)


# -- rule 1: pods beyond subGroupSize are members: placed, and counted toward minMember ----


def test_pods_beyond_sub_group_size_are_placed_and_count_toward_min_member() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 4, policies=[policy("p", size=2, network_topology=topology(tier=1))])
    pods = [member("job", i, 0) for i in range(4)]  # one sub-group of 4 pods, size 2
    result = run(nodes, hns, pods, [pg])
    got = placed(result)
    # before: "the gang cannot become ready with its pods" (only 2 of minMember 4 counted)
    assert len(got) == 4, reasons(result)
    assert {LEAF[n] for n in got.values()} == {"s0"}  # the whole sub-group in one leaf


def test_a_sub_group_beyond_its_size_waits_for_room_in_its_own_domain() -> None:
    nodes, hns = canonical()
    running = [pod("other", node_name="node-1", gpu=4)]  # s0 holds 3 of the 4 pods
    running += [pod(f"x{i}", node_name=f"node-{i}", gpu=8) for i in range(2, 8)]
    pg = podgroup("job", 4, policies=[policy("p", size=2, network_topology=topology(tier=1))])
    pods = [member("job", i, 0) for i in range(4)]
    result = run(nodes, hns, running + pods, [pg])
    assert result.bindings == ()
    why = reasons(result)["default/job"]
    assert "cannot become ready" not in why
    assert "sub-group p-0" in why


def test_extra_members_of_a_sub_group_beyond_min_member_go_when_they_fit() -> None:
    nodes, hns = canonical()
    pg = podgroup("job", 2, policies=[policy("p", size=2, network_topology=topology(tier=1))])
    pods = [member("job", i, 0) for i in range(3)]  # size 2, minMember 2, a third pod
    got = placed(run(nodes, hns, pods, [pg]))
    assert len(got) == 3
    assert {LEAF[n] for n in got.values()} == {"s0"}  # the third stays in the sub-group's leaf


# -- rule 2: minSubGroups counts sub-groups already running --------------------------------


def test_min_sub_groups_counts_sub_groups_already_running() -> None:
    nodes = [node("a", gpu=8), node("b", gpu=8), node("c", gpu=8)]
    pg = podgroup("job", 2, policies=[policy("p", size=1, min_groups=2)])
    running = [member("job", 0, 0, gpu=8, on="a"), member("job", 1, 1, gpu=8, on="b")]
    pending = [member("job", 2, 2, gpu=8), member("job", 3, 3, gpu=8)]  # room for one
    result = run(nodes, pods=running + pending, podgroups=[pg])
    # the gang is ready with p-0 and p-1 running: p-2 goes as a member beyond the minimum;
    # before, minSubGroups asked for two *new* sub-groups and the gang waited
    assert placed(result) == {"default/job-2": "c"}


def test_min_sub_groups_still_needs_new_ones_when_too_few_run() -> None:
    nodes = [node("a", gpu=8), node("b", gpu=8)]
    pg = podgroup("job", 1, policies=[policy("p", size=1, min_groups=3)])
    running = [member("job", 0, 0, gpu=8, on="a")]
    pending = [member("job", 1, 1, gpu=8), member("job", 2, 2, gpu=8)]  # room for one
    result = run(nodes, pods=running + pending, podgroups=[pg])
    assert result.bindings == ()
    assert "sub-group p-2" in reasons(result)["default/job"]  # p-0 runs, p-1 fits, p-2 not
    pending.append(member("job", 3, 3, gpu=8))
    two = run([*nodes, node("c", gpu=8)], pods=running + pending, podgroups=[pg])
    assert len(placed(two)) == 2  # p-0 runs; two more make three


# -- rule 3: a hard sub-group with running pods stays in its domain -------------------------


def test_a_hard_sub_group_with_a_running_pod_never_leaves_its_leaf() -> None:
    nodes, hns = canonical()
    pg = podgroup(
        "job",
        2,
        network_topology=topology(tier=3),
        policies=[policy("p", size=2, network_topology=topology(tier=1))],
    )
    running = [member("job", 0, 0, gpu=8, on="node-0")]
    blocker = pod("blocker", node_name="node-1", gpu=8)  # s0 is full now
    late = member("job", 1, 0, gpu=8)
    result = run(nodes, hns, [*running, blocker, late], [pg])
    # before: job-1 landed in s1, so sub-group p-0 spanned s4 (tier 2) above its tier 1
    assert result.bindings == ()
    assert "s0" in reasons(result)["default/job"]
    # with room in s0 it goes there
    got = placed(run(nodes, hns, [*running, late], [pg]))
    assert got == {"default/job-1": "node-1"}


def test_a_sub_group_domain_outside_the_gang_domain_waits_with_a_reason() -> None:
    nodes = [node(f"{leaf}n{i}", gpu=8) for leaf in ("a0", "a1") for i in range(2)]
    hns = [
        hypernode("a0", 1, nodes=["a0n0", "a0n1"]),
        hypernode("a1", 1, nodes=["a1n0", "a1n1"]),
        hypernode("aa", 2, children=["a0", "a1"]),
    ]
    pg = podgroup(
        "job",
        4,
        network_topology=topology(tier=2),
        policies=[policy("p", size=2, min_groups=2, network_topology=topology(tier=1))],
    )
    running = [member("job", 0, 0, on="a0n0")]
    pending = [member("job", 1, 0), member("job", 2, 1), member("job", 3, 1)]
    # a1 can hold all three new pods, and is tried first (it is tighter than aa); but p-0
    # runs in a0 and may not leave it, and a1 does not overlap a0
    blocker = [pod("b0", node_name="a0n0", gpu=4), pod("b1", node_name="a0n1", gpu=8)]
    result = run(nodes, hns, running + blocker + pending, [pg])
    assert result.bindings == ()  # before: job-1 went to a1 and p-0 spanned aa (tier 2)
    why = reasons(result)["default/job"]
    assert (
        "sub-group p-0: its pods run in a0 (highestTierAllowed: 1), which does not overlap a1"
        in why
    )
    # with room in a0, the gang goes: p-0 in a0, p-1 in a1
    got = placed(run(nodes, hns, running + blocker[:1] + pending, [pg]))
    assert {k: LEAF_A[n] for k, n in got.items()} == {
        "default/job-1": "a0",
        "default/job-2": "a1",
        "default/job-3": "a1",
    }


LEAF_A = {"a0n0": "a0", "a0n1": "a0", "a1n0": "a1", "a1n1": "a1"}


# -- the property: no sub-group ever spans above its hard tier ------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Node], list[HyperNode], list[Pod], list[PodGroup]]:
    """Random trees, gangs with hard sub-groups, and random running pods of those gangs."""
    depth = draw(st.integers(2, 3))
    fanout = [draw(st.integers(1, 3)) for _ in range(depth)]
    per_leaf = draw(st.integers(1, 3))
    nodes: list[Node] = []
    hns: list[HyperNode] = []

    def build(level: int, prefix: str) -> str:
        name = f"h{prefix}"
        if level == 1:
            names = [f"n{len(nodes) + k:03d}" for k in range(per_leaf)]
            nodes.extend(node(n, cpu=16, gpu=8) for n in names)
            hns.append(hypernode(name, 1, nodes=names))
        else:
            kids = [build(level - 1, f"{prefix}{i}") for i in range(fanout[level - 1])]
            hns.append(hypernode(name, level, children=kids))
        return name

    for t in range(draw(st.integers(1, 2))):
        build(depth, str(t))
    pods: list[Pod] = []
    pgs: list[PodGroup] = []
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        size = draw(st.integers(1, 3))
        groups = draw(st.integers(1, 3))
        sub_tier = draw(st.integers(1, depth))
        gang_nt = draw(st.sampled_from([None, topology(tier=depth + 1), topology(mode="soft")]))
        pol = policy("p", size=size, min_groups=draw(st.integers(0, groups)))
        pol = type(pol)(
            name=pol.name,
            label_selector=None,
            match_label_keys=pol.match_label_keys,
            sub_group_size=size,
            min_sub_groups=pol.min_sub_groups,
            network_topology=topology(tier=sub_tier),
        )
        count = 0
        for part in range(groups):
            for _ in range(size + draw(st.integers(0, 2))):  # some sub-groups beyond their size
                gpu = draw(st.sampled_from([1, 2, 4]))
                on = draw(st.one_of(st.just(""), st.sampled_from([n.name for n in nodes])))
                pods.append(member(name, count, part, gpu=gpu, on=on))
                count += 1
        pgs.append(
            podgroup(name, draw(st.integers(1, count)), network_topology=gang_nt, policies=[pol])
        )
    return nodes, hns, pods, pgs


def spans_within(ix: TopologyIndex, names: set[str], tier: int) -> bool:
    """Whether one usable HyperNode of tier <= ``tier`` holds every node in ``names``."""
    return any(
        bool(ix.usable[h]) and int(ix.tier[h]) <= tier and names <= set(ix.nodes_under(h))
        for h in range(ix.root)
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_no_sub_group_ever_spans_above_its_hard_tier(
    world: tuple[list[Node], list[HyperNode], list[Pod], list[PodGroup]],
) -> None:
    nodes, hns, pods, pgs = world
    state = ClusterStore.from_snapshot(snapshot(nodes, hns, pods, pgs))
    ix = state.index
    result = run_session(state)
    new = {b.pod: b.node for b in result.bindings}
    limit = {pg.name: pg.sub_group_policies[0].network_topology for pg in pgs}
    where: dict[tuple[str, str], set[str]] = defaultdict(set)
    fresh: set[tuple[str, str]] = set()
    for p in pods:
        key = (p.group_name or "", p.meta.labels[PART])
        if p.node_name:
            where[key].add(p.node_name)
        if p.key in new:
            where[key].add(new[p.key])
            fresh.add(key)
    for g, part in fresh:
        nt = limit[g]
        assert nt is not None and nt.highest_tier_allowed is not None
        assert spans_within(ix, where[(g, part)], nt.highest_tier_allowed), (
            g,
            part,
            sorted(where[(g, part)]),
            nt.highest_tier_allowed,
        )
