"""Queues: priority order, capability, guarantee, dominant-resource fair share."""

from __future__ import annotations

from tests.scheduler.helpers import placed, reasons, run

from tierra.scheduler import SessionResult
from tierra.scheduler.queueing.queue_status import volcano_status, volcano_status_patches
from tierra.scheduler.testing import gang, node, pod, podgroup, queue

GPU = "nvidia.com/gpu"


def test_higher_priority_gang_goes_first() -> None:
    nodes = [node("a")]
    low_pg, low = gang("low", 1, gpu=8)
    high_pg, high = gang("high", 1, gpu=8, priority=100)
    result = run(nodes, pods=low + high, podgroups=[low_pg, high_pg])
    assert placed(result) == {"default/high-0": "a"}
    assert "default/low" in reasons(result)


def test_older_gangs_go_first_whatever_their_names() -> None:
    """Equal priority: the oldest first (creationTimestamp, as Volcano and Kueue order
    jobs), not the name; by name alone "a-late" would take the node "z-early" waited for."""
    from dataclasses import replace

    def aged(pg_pods: tuple, created: float) -> tuple:
        pg, pods = pg_pods
        return replace(pg, meta=replace(pg.meta, created=created)), pods

    early_pg, early = aged(gang("z-early", 1, gpu=8), 100.0)
    late_pg, late = aged(gang("a-late", 1, gpu=8), 200.0)
    result = run([node("a")], pods=late + early, podgroups=[late_pg, early_pg])
    assert placed(result) == {"default/z-early-0": "a"}
    assert "default/a-late" in reasons(result)
    # a gang with no creationTimestamp goes after those with one, then by name
    none_pg, none = gang("b-unknown", 1, gpu=8)
    result = run([node("a")], pods=none + late, podgroups=[none_pg, late_pg])
    assert placed(result) == {"default/a-late-0": "a"}


def test_capability_caps_a_queue() -> None:
    nodes = [node("a"), node("b")]
    q = queue("team", capability={GPU: 8000})
    running = pod("r", group="old", gpu=8, node_name="a")
    old = podgroup("old", 1, queue="team")
    pg, pods = gang("job", 1, gpu=8, queue_name="team")
    result = run(nodes, pods=[running, *pods], podgroups=[old, pg], queues=[q])
    assert reasons(result)["default/job"] == (
        "queue team capability: 8 nvidia.com/gpu allowed, 8 nvidia.com/gpu in use, "
        "the gang needs 8 nvidia.com/gpu more"
    )


def test_lighter_queue_goes_first() -> None:
    nodes = [node(n) for n in "abc"]
    qa, qb = queue("a"), queue("b")
    running = pod("r", group="a-old", gpu=8, node_name="a")
    old = podgroup("a-old", 1, queue="a")
    pa, a_pods = gang("a-new", 2, gpu=8, queue_name="a")
    pb, b_pods = gang("b-new", 2, gpu=8, queue_name="b")
    result = run(nodes, pods=[running, *a_pods, *b_pods], podgroups=[old, pa, pb], queues=[qa, qb])
    assert set(placed(result)) == {"default/b-new-0", "default/b-new-1"}


def test_a_queue_over_its_fair_share_waits() -> None:
    nodes = [node(n) for n in "abcd"]
    qa, qb = queue("a"), queue("b")
    running = [pod(f"r{i}", group="a-old", gpu=8, node_name=n) for i, n in enumerate("abc")]
    old = podgroup("a-old", 3, queue="a")
    pa, a_pods = gang("a-new", 1, gpu=8, queue_name="a")
    pb, b_pods = gang("b-new", 2, gpu=8, queue_name="b")
    result = run(nodes, pods=[*running, *a_pods, *b_pods], podgroups=[old, pa, pb], queues=[qa, qb])
    assert result.bindings == ()  # b's gang needs 2 nodes, only 1 is free
    assert reasons(result)["default/a-new"] == (
        "queue a holds its fair share of nvidia.com/gpu already (deserved 16 nvidia.com/gpu, "
        "in use 24 nvidia.com/gpu, weight 1) while queue b waits"
    )


def test_guarantees_of_other_queues_are_held_back() -> None:
    nodes = [node("a"), node("b")]
    qa = queue("a")
    qb = queue("b", guarantee={GPU: 8000})
    pa, a_pods = gang("a-new", 2, gpu=8, queue_name="a")
    result = run(nodes, pods=a_pods, podgroups=[pa], queues=[qa, qb])
    assert "guaranteed to other queues" in reasons(result)["default/a-new"]


# -- capability for every pod (issue 15) ------------------------------------------------


def gpus_bound(result: SessionResult, per_pod: int) -> int:
    return per_pod * len(result.bindings)


def test_capability_holds_beyond_the_minimum() -> None:
    """The issue's example: 8 GPUs, capability 4, minMember 1, three 2-GPU pods."""
    q = queue("team", capability={GPU: 4000})
    pg, pods = gang("job", 3, min_member=1, gpu=2, queue_name="team")
    result = run([node("a")], pods=pods, podgroups=[pg], queues=[q])
    assert gpus_bound(result, 2) == 4
    assert len(placed(result)) == 2
    assert reasons(result)["default/job"] == (
        "1 pending pod beyond minMember waits: queue team capability: 4 nvidia.com/gpu "
        "allowed, 4 nvidia.com/gpu in use, a pod needs 2 nvidia.com/gpu more"
    )
    team = {s.name: s for s in result.queues}["team"]
    assert team.allocated[GPU] == 4000 and team.pending == 1 and team.running == 1


def test_capability_holds_when_a_running_gang_grows() -> None:
    q = queue("team", capability={GPU: 4000})
    pg = podgroup("job", 1, queue="team")
    running = pod("job-0", group="job", gpu=2, node_name="a")
    more = [pod(f"job-{i}", group="job", gpu=2) for i in (1, 2)]
    result = run([node("a")], pods=[running, *more], podgroups=[pg], queues=[q])
    assert list(placed(result)) == ["default/job-1"]
    assert "queue team capability: 4 nvidia.com/gpu allowed" in reasons(result)["default/job"]


def test_a_queue_at_its_capability_grows_no_gang() -> None:
    q = queue("team", capability={GPU: 2000})
    pg = podgroup("job", 1, queue="team")
    running = pod("job-0", group="job", gpu=2, node_name="a")
    more = pod("job-1", group="job", gpu=2)
    result = run([node("a")], pods=[running, more], podgroups=[pg], queues=[q])
    assert result.bindings == ()
    assert reasons(result)["default/job"] == (
        "1 pending pod beyond minMember waits: queue team capability: 2 nvidia.com/gpu "
        "allowed, 2 nvidia.com/gpu in use, a pod needs 2 nvidia.com/gpu more"
    )


def test_the_minimum_is_placed_whole_or_not_at_all() -> None:
    q = queue("team", capability={GPU: 4000})
    pg, pods = gang("job", 3, min_member=3, gpu=2, queue_name="team")
    result = run([node("a")], pods=pods, podgroups=[pg], queues=[q])
    assert result.bindings == ()
    assert reasons(result)["default/job"] == (
        "queue team capability: 4 nvidia.com/gpu allowed, 0 nvidia.com/gpu in use, "
        "the gang needs 6 nvidia.com/gpu more"
    )


def test_an_ancestor_capability_holds_for_every_pod() -> None:
    org = queue("org", capability={GPU: 6000})
    a = queue("a", parent="org")
    b = queue("b", parent="org")
    old = podgroup("old", 1, queue="b")
    running = pod("old-0", group="old", gpu=4, node_name="a")
    pg, pods = gang("job", 3, min_member=1, gpu=1, queue_name="a")
    result = run([node("a")], pods=[running, *pods], podgroups=[old, pg], queues=[org, a, b])
    assert len(result.bindings) == 2  # org: 4 held by b, 2 left for a
    assert (
        "queue org (an ancestor of a) capability: 6 nvidia.com/gpu allowed"
        in (reasons(result)["default/job"])
    )
    by_name = {s.name: s for s in result.queues}
    assert by_name["org"].allocated[GPU] == 6000 and by_name["a"].allocated[GPU] == 2000


def test_guarantees_of_other_queues_hold_for_every_pod() -> None:
    qa = queue("a")
    qb = queue("b", guarantee={GPU: 4000})
    pg, pods = gang("job", 4, min_member=1, gpu=2, queue_name="a")
    result = run([node("a")], pods=pods, podgroups=[pg], queues=[qa, qb])
    assert len(result.bindings) == 2  # 8 GPUs, 4 held for b
    assert (
        "guaranteed to other queues (4 nvidia.com/gpu held back)"
        in (reasons(result)["default/job"])
    )


def test_a_queue_with_children_takes_no_pods() -> None:
    org = queue("org")
    child = queue("child", parent="org")
    pg, pods = gang("job", 1, gpu=1, queue_name="org")
    result = run([node("a")], pods=pods, podgroups=[pg], queues=[org, child])
    assert result.bindings == ()
    assert reasons(result)["default/job"] == (
        "queue org has child queues (child); only leaf queues take pods"
    )


def test_a_queue_under_a_missing_parent_fails_alone() -> None:
    lost = queue("lost", parent="ghost")
    fine = queue("fine")
    pl, lost_pods = gang("l", 1, gpu=1, queue_name="lost")
    pf, fine_pods = gang("f", 1, gpu=1, queue_name="fine")
    result = run([node("a")], pods=lost_pods + fine_pods, podgroups=[pl, pf], queues=[lost, fine])
    assert list(placed(result)) == ["default/f-0"]
    assert reasons(result)["default/l"] == "queue lost's parent queue 'ghost' does not exist"
    status = {s.name: s for s in result.queues}["lost"]
    assert status.parent is None and status.problem is not None and status.pending == 1


def test_sibling_teams_order_by_their_subtree_share() -> None:
    """A team whose other queue already holds a lot goes after a lighter team."""
    heavy = queue("heavy")
    h1, h2 = queue("h1", parent="heavy"), queue("h2", parent="heavy")
    light = queue("light")
    old = podgroup("old", 1, queue="h2")
    running = pod("old-0", group="old", gpu=8, node_name="a")
    ph, h_pods = gang("hjob", 1, gpu=8, queue_name="h1")
    pl, l_pods = gang("ljob", 1, gpu=8, queue_name="light")
    result = run(
        [node("a"), node("b")],
        pods=[running, *h_pods, *l_pods],
        podgroups=[old, ph, pl],
        queues=[heavy, h1, h2, light],
    )
    assert list(placed(result)) == ["default/ljob-0"]


def test_queue_status_rolls_up_the_tree() -> None:
    team = queue("team", capability={GPU: 16_000})
    a, b = queue("a", parent="team"), queue("b", parent="team")
    old = podgroup("old", 1, queue="a")
    running = pod("old-0", group="old", gpu=8, node_name="n0")
    pa, a_pods = gang("more", 1, gpu=8, queue_name="a")
    pb, b_pods = gang("wide", 2, gpu=8, queue_name="b")  # two more nodes: only one is free
    result = run(
        [node("n0"), node("n1")],
        pods=[running, *a_pods, *b_pods],
        podgroups=[old, pa, pb],
        queues=[team, a, b],
    )
    by_name = {s.name: s for s in result.queues}
    assert [s.name for s in result.queues] == ["root", "default", "team", "a", "b"]
    # a holds its share (8 of team's 16) while b waits: its second gang waits too
    assert (
        "queue a holds its fair share of nvidia.com/gpu already" in reasons(result)["default/more"]
    )
    assert by_name["a"].allocated[GPU] == 8_000
    assert (by_name["a"].running, by_name["a"].pending) == (1, 1)
    assert by_name["b"].pending == 1 and by_name["b"].allocated.get(GPU, 0) == 0
    assert by_name["team"].allocated[GPU] == 8_000
    assert (by_name["team"].running, by_name["team"].pending) == (1, 2)
    assert by_name["a"].capability == {GPU: 16_000}  # its parent's applies
    assert by_name["team"].parent == "root" and by_name["a"].parent == "team"
    # deserved: team's share of the cluster (16 GPUs) cut between a (wants 16) and b (16)
    assert by_name["team"].deserved[GPU] == 16_000
    assert by_name["a"].deserved[GPU] == 8_000 and by_name["b"].deserved[GPU] == 8_000
    body = volcano_status(by_name["team"])
    assert body == {
        "allocated": {"cpu": "1", "memory": "1Gi", GPU: "8", "pods": "1"},
        "pending": 2,
        "running": 1,
    }
    patches = volcano_status_patches(result.queues)
    assert set(patches) == {"root", "default", "team", "a", "b"}
    assert patches["team"] == {"status": body}
