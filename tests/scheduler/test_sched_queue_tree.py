"""The queue tree: parents, the root, leaves, and the problems a bad tree has."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler.queueing.queue_tree import ROOT, QueueTree, podgroup_queue_problems
from tierra.scheduler.testing import podgroup, queue

GPU = "nvidia.com/gpu"


def q(name: str, parent: str = "", **kw: Any) -> Queue:
    return queue(name, parent=parent, **kw)


def problems(tree: QueueTree) -> list[tuple[str, str, str]]:
    return [(p.obj, p.path, p.message) for p in tree.problems]


def test_queues_without_a_parent_hang_under_root() -> None:
    tree = QueueTree.build([q("a"), q("b", "a"), q("c", "a")])
    assert tree.children[ROOT] == ("a", "default")
    assert tree.children["a"] == ("b", "c")
    assert tree.ancestors("b") == ("a", ROOT)
    assert tree.path("b") == ("a", "b")
    assert tree.order.index("a") < tree.order.index("b")
    assert tree.is_leaf("b") and not tree.is_leaf("a")
    assert tree.subtree("a") == ("a", "b", "c")
    assert tree.problems == ()


def test_a_queue_with_children_takes_no_pods() -> None:
    tree = QueueTree.build([q("a"), q("b", "a")])
    assert tree.leaf_problem("b") is None
    assert tree.leaf_problem("a") == "queue a has child queues (b); only leaf queues take pods"
    assert tree.leaf_problem(ROOT) is not None
    assert tree.leaf_problem("nope") == "queue 'nope' does not exist"
    pg: PodGroup = podgroup("job", 1, queue="a")
    found = podgroup_queue_problems([pg, podgroup("ok", 1, queue="b")], tree)
    assert [(p.obj, p.path) for p in found] == [("PodGroup/default/job", "spec.queue")]


def test_a_missing_parent_breaks_that_queue_and_its_children_only() -> None:
    tree = QueueTree.build([q("a", "ghost"), q("b", "a"), q("c")])
    assert problems(tree) == [
        ("Queue/a", "spec.parent", "queue a's parent queue 'ghost' does not exist")
    ]
    assert tree.leaf_problem("b") == (
        "its ancestor queue a: queue a's parent queue 'ghost' does not exist"
    )
    assert tree.leaf_problem("c") is None
    assert "a" not in tree.order and "b" not in tree.order and "c" in tree.order


def test_a_cycle_is_reported_for_each_queue_on_it() -> None:
    tree = QueueTree.build([q("a", "b"), q("b", "a"), q("tail", "a"), q("self", "self")])
    found = problems(tree)
    assert ("Queue/a", "spec.parent", "queue cycle a -> b -> a") in found
    assert ("Queue/b", "spec.parent", "queue cycle a -> b -> a") in found
    assert ("Queue/self", "spec.parent", "queue self names itself as its parent") in found
    assert not any(obj == "Queue/tail" for obj, _, _ in found)  # reported at the cause
    assert tree.leaf_problem("tail") == "its ancestor queue a: queue cycle a -> b -> a"
    assert set(tree.broken) == {"a", "b", "tail", "self"}


def test_the_root_queue_cannot_have_a_parent() -> None:
    tree = QueueTree.build([q(ROOT, "a"), q("a")])
    assert problems(tree) == [
        ("Queue/root", "spec.parent", "the root queue has no parent (got 'a'); ignored")
    ]
    assert tree.ancestors("a") == (ROOT,)


def test_a_child_is_capped_by_every_ancestor() -> None:
    tree = QueueTree.build(
        [
            q("org", capability={GPU: 8000, "cpu": 64000}),
            q("team", "org", capability={GPU: 16000}),
            q("sub", "team", capability={"cpu": 8000}),
        ]
    )
    assert tree.capability("sub") == {GPU: 8000, "cpu": 8000}
    assert problems(tree) == [
        (
            "Queue/team",
            "spec.capability.nvidia.com/gpu",
            "16 exceeds ancestor queue org's capability 8 (that one applies)",
        )
    ]


def test_children_asking_for_more_than_their_parent() -> None:
    tree = QueueTree.build(
        [
            q("org", guarantee={GPU: 8000}, deserved={GPU: 8000}),
            q("a", "org", guarantee={GPU: 6000}, deserved={GPU: 6000}),
            q("b", "org", guarantee={GPU: 4000}, deserved={GPU: 4000}),
        ]
    )
    assert problems(tree) == [
        (
            "Queue/org",
            "spec.guarantee.resource.nvidia.com/gpu",
            "child queues ask for 10 nvidia.com/gpu in total (a 6, b 4), more than this "
            "queue's guarantee 8; they share it instead",
        ),
        (
            "Queue/org",
            "spec.deserved.nvidia.com/gpu",
            "child queues ask for 10 nvidia.com/gpu in total (a 6, b 4), more than this "
            "queue's deserved 8; they share it instead",
        ),
    ]


def test_guarantee_deserved_capability_order_inside_a_queue() -> None:
    tree = QueueTree.build(
        [q("a", capability={GPU: 4000}, guarantee={GPU: 6000}, deserved={GPU: 5000})]
    )
    assert problems(tree) == [
        ("Queue/a", "spec.guarantee.resource.nvidia.com/gpu", "guarantee 6 is above capability 4"),
        ("Queue/a", "spec.deserved.nvidia.com/gpu", "deserved 5 is below guarantee 6"),
        ("Queue/a", "spec.deserved.nvidia.com/gpu", "deserved 5 is above capability 4"),
    ]


def test_a_closed_ancestor_closes_its_children() -> None:
    org = replace(queue("org"), state="Closed")
    tree = QueueTree.build([org, q("team", "org")])
    assert tree.leaf_problem("team") == "queue team's ancestor queue org is Closed"
