"""Queues: priority order, capability, guarantee, dominant-resource fair share."""

from __future__ import annotations

from tests.scheduler.helpers import placed, reasons, run

from tierra.scheduler.testing import gang, node, pod, podgroup, queue

GPU = "nvidia.com/gpu"


def test_higher_priority_gang_goes_first() -> None:
    nodes = [node("a")]
    low_pg, low = gang("low", 1, gpu=8)
    high_pg, high = gang("high", 1, gpu=8, priority=100)
    result = run(nodes, pods=low + high, podgroups=[low_pg, high_pg])
    assert placed(result) == {"default/high-0": "a"}
    assert "default/low" in reasons(result)


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
