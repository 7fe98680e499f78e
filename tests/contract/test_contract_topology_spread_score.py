"""PodTopologySpread's score (``whenUnsatisfiable: ScheduleAnyway``), following
``plugins/podtopologyspread/scoring_test.go`` ``TestPodTopologySpreadScore`` case by case
(node inclusion policies and matchLabelKeys on, as in v1.36's defaults)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.contract.rules_helpers import BAR, FOO, incoming, make_pod, spread
from tests.contract.score_helpers import bare_node, topology_spread

from tierra.api.node import Node
from tierra.api.pod import Pod

HOST = "kubernetes.io/hostname"
TAINT = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


def soft(
    skew: int, key: str, selector: dict[str, Any] | None = FOO, **extra: Any
) -> dict[str, Any]:
    return spread(skew, key, selector, "ScheduleAnyway", **extra)


_n = iter(range(100_000))


def on(
    node: str, n: int = 1, labels: dict[str, str] | None = None, ns: str = "default"
) -> list[Pod]:
    return [
        make_pod(
            f"x{next(_n)}",
            labels={"foo": ""} if labels is None else labels,
            node_name=node,
            namespace=ns,
        )
        for _ in range(n)
    ]


def hosts(*names: str, **labels: str) -> list[Node]:
    return [bare_node(n, {HOST: n, **labels}) for n in names]


def zoned(*pairs: tuple[str, str]) -> list[Node]:
    return [bare_node(n, {"zone": z, HOST: n}) for n, z in pairs]


ZONED4 = (("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))


def test_one_constraint_on_node_no_existing_pods() -> None:
    """ "one constraint on node, no existing pods"."""
    p = incoming(soft(1, HOST))
    assert topology_spread(p, hosts("node-a", "node-b")) == {"node-a": 100, "node-b": 100}


def test_one_constraint_on_node_only_one_node_is_candidate() -> None:
    """ "one constraint on node, only one node is candidate"."""
    p = incoming(soft(1, HOST))
    placed = on("node-a", 2) + on("node-b")
    got = topology_spread(p, hosts("node-a"), placed, failed=hosts("node-b"))
    assert got == {"node-a": 100}


def test_one_constraint_on_node_same_number_everywhere() -> None:
    """ "one constraint on node, all nodes have the same number of matching pods"."""
    p = incoming(soft(1, HOST))
    got = topology_spread(p, hosts("node-a", "node-b"), on("node-a") + on("node-b"))
    assert got == {"node-a": 100, "node-b": 100}


SPREAD_2103 = ("node-a", 2), ("node-b", 1), ("node-d", 3)


@pytest.mark.parametrize(
    ("skew", "selector", "want"),
    [
        (1, FOO, {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0}),
        (1, None, {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100}),
        (2, FOO, {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16}),
    ],
    ids=[
        "one constraint on node, all 4 nodes are candidates",
        "one constraint on node, null selector",
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
    ],
)
def test_one_constraint_on_node_2_1_0_3(
    skew: int, selector: dict[str, Any] | None, want: dict[str, int]
) -> None:
    p = incoming(soft(skew, HOST, selector))
    placed = [pod for node, n in SPREAD_2103 for pod in on(node, n)]
    assert topology_spread(p, hosts("node-a", "node-b", "node-c", "node-d"), placed) == want


def test_one_constraint_on_node_max_skew_3() -> None:
    """ "one constraint on node, all 4 nodes are candidates, maxSkew=3" (4/3/2/1)."""
    p = incoming(soft(3, HOST))
    placed = on("node-a", 4) + on("node-b", 3) + on("node-c", 2) + on("node-d")
    got = topology_spread(p, hosts("node-a", "node-b", "node-c", "node-d"), placed)
    assert got == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_one_constraint_on_node_3_of_4_candidates() -> None:
    """ "one constraint on node, 3 out of 4 nodes are candidates" (4/2/1/~3~)."""
    p = incoming(soft(1, HOST))
    placed = on("node-a", 4) + on("node-b", 2) + on("node-x") + on("node-y", 3)
    got = topology_spread(p, hosts("node-a", "node-b", "node-x"), placed, failed=hosts("node-y"))
    assert got == {"node-a": 33, "node-b": 83, "node-x": 100}


def test_one_constraint_on_node_one_node_without_the_key() -> None:
    """ "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match
    topology key" (4/?2?/1/~3~)."""
    p = incoming(soft(1, HOST))
    placed = on("node-a", 4) + on("node-b", 2) + on("node-x") + on("node-y", 3)
    nodes = [bare_node("node-a", {HOST: "node-a"}), bare_node("node-b", {"n": "node-b"})]
    nodes.append(bare_node("node-x", {HOST: "node-x"}))
    got = topology_spread(p, nodes, placed, failed=hosts("node-y"))
    assert got == {"node-a": 16, "node-b": 0, "node-x": 100}


def test_one_constraint_on_zone_3_of_4_candidates() -> None:
    """ "one constraint on zone, 3 out of 4 nodes are candidates" (4/2/1/~3~)."""
    p = incoming(soft(1, "zone"))
    placed = on("node-a", 4) + on("node-b", 2) + on("node-x") + on("node-y", 3)
    nodes = zoned(*ZONED4[:3])
    got = topology_spread(p, nodes, placed, failed=zoned(ZONED4[3]))
    assert got == {"node-a": 75, "node-b": 75, "node-x": 100}


def test_two_constraints_on_zone_and_node_2_of_4_candidates() -> None:
    """ "two Constraints on zone and node, 2 out of 4 nodes are candidates" (2/~1~/2/~4~)."""
    p = incoming(soft(1, "zone"), soft(1, HOST))
    placed = on("node-a", 2) + on("node-b") + on("node-x", 2) + on("node-y", 4)
    nodes = zoned(("node-a", "zone1"), ("node-x", "zone2"))
    failed = zoned(("node-b", "zone1"), ("node-y", "zone2"))
    assert topology_spread(p, nodes, placed, failed) == {"node-a": 100, "node-x": 63}


def test_two_constraints_on_zone_2_of_4_candidates() -> None:
    """ "two Constraints on zone, 2 out of 4 nodes are candidates"."""
    p = incoming(soft(1, "zone"), soft(1, "zone", BAR), labels={"foo": "", "bar": ""})
    fb = {"foo": "", "bar": ""}
    placed = (
        on("node-a", 1, fb)
        + on("node-a")
        + on("node-b", 1, fb)
        + on("node-y")
        + on("node-y", 1, fb)
        + on("node-y")
    )
    nodes = [bare_node("node-a", {"zone": "zone1"}), bare_node("node-x", {"zone": "zone2"})]
    failed = [bare_node("node-b", {"zone": "zone1"}), bare_node("node-y", {"zone": "zone2"})]
    assert topology_spread(p, nodes, placed, failed) == {"node-a": 85, "node-x": 100}


@pytest.mark.parametrize(
    ("placed_at", "candidates", "want"),
    [
        (
            [
                ("node-a", {"foo": ""}),
                ("node-b", {"foo": "", "bar": ""}),
                ("node-y", {"foo": ""}),
                ("node-y", {"bar": ""}),
            ],
            4,
            {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
        ),
        (
            [("node-b", {"bar": ""}), ("node-x", {"foo": ""}), ("node-y", {"foo": "", "bar": ""})],
            4,
            {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
        ),
        (
            [
                ("node-a", {"foo": ""}),
                ("node-b", {"foo": "", "bar": ""}),
                ("node-y", {"foo": ""}),
                ("node-y", {"bar": ""}),
            ],
            3,
            {"node-a": 50, "node-b": 25, "node-x": 100},
        ),
    ],
    ids=[
        "two Constraints on zone and node, with different labelSelectors",
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are "
        "candidates",
    ],
)
def test_two_constraints_with_different_selectors(
    placed_at: list[tuple[str, dict[str, str]]], candidates: int, want: dict[str, int]
) -> None:
    p = incoming(soft(1, "zone"), soft(1, HOST, BAR), labels={"foo": "", "bar": ""})
    placed = [pod for node, labels in placed_at for pod in on(node, 1, labels)]
    nodes = zoned(*ZONED4)
    assert topology_spread(p, nodes[:candidates], placed, nodes[candidates:]) == want


def test_existing_pods_in_a_different_namespace_do_not_count() -> None:
    """ "existing pods in a different namespace do not count"."""
    p = incoming(soft(1, HOST))
    placed = on("node-a", ns="ns1") + on("node-a") + on("node-b", 2)
    assert topology_spread(p, hosts("node-a", "node-b"), placed) == {"node-a": 100, "node-b": 33}


def test_min_domains_has_no_effect_when_schedule_anyway() -> None:
    """ "minDomains has no effect when ScheduleAnyway"."""
    p = incoming(soft(2, "node", minDomains=10))
    placed = on("node-a", 2) + on("node-b", 2) + on("node-c")
    nodes = [bare_node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
    assert topology_spread(p, nodes, placed) == {"node-a": 75, "node-b": 75, "node-c": 100}


def _policy_nodes(taint: bool = False) -> list[Node]:
    out = [
        bare_node("node-a", {"node": "node-a", "foo": ""}),
        bare_node("node-b", {"node": "node-b", "foo": ""}),
    ]
    if taint:
        from tierra.api.node import decode_node

        doc = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-c", "labels": {"node": "node-c"}},
            "spec": {"taints": TAINT},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
        }
        out = [bare_node(n, {"node": n}) for n in ("node-a", "node-b")]
        out.append(decode_node(doc, None, []))
    else:
        out.append(bare_node("node-c", {"node": "node-c"}))
    return out


POLICY_PODS = ("node-a", 2), ("node-b", 1), ("node-c", 1)
IN_FOO = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "foo", "operator": "In", "values": [""]}]}
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("extra", "pod_spec", "taint", "want"),
    [
        ({}, {"nodeSelector": {"foo": ""}}, False, {"node-a": 0, "node-b": 33, "node-c": 100}),
        (
            {"nodeAffinityPolicy": "Ignore"},
            {"nodeSelector": {"foo": ""}},
            False,
            {"node-a": 66, "node-b": 100, "node-c": 100},
        ),
        ({}, {"affinity": IN_FOO}, False, {"node-a": 0, "node-b": 33, "node-c": 100}),
        (
            {"nodeAffinityPolicy": "Ignore"},
            {"affinity": IN_FOO},
            False,
            {"node-a": 66, "node-b": 100, "node-c": 100},
        ),
        ({"nodeTaintsPolicy": "Honor"}, {}, True, {"node-a": 0, "node-b": 33, "node-c": 100}),
        ({}, {}, True, {"node-a": 66, "node-b": 100, "node-c": 100}),
    ],
    ids=[
        "NodeAffinityPolicy honoed with labelSelectors",
        "NodeAffinityPolicy ignored with labelSelectors",
        "NodeAffinityPolicy honoed with nodeAffinity",
        "NodeAffinityPolicy ignored with nodeAffinity",
        "NodeTaintsPolicy honored",
        "NodeTaintsPolicy ignored",
    ],
)
def test_node_inclusion_policies(
    extra: dict[str, Any], pod_spec: dict[str, Any], taint: bool, want: dict[str, int]
) -> None:
    p = incoming(soft(1, "node", **extra), **pod_spec)
    placed = [pod for node, n in POLICY_PODS for pod in on(node, n)]
    assert topology_spread(p, _policy_nodes(taint), placed) == want


def test_match_label_keys_anded_with_an_empty_selector() -> None:
    """ "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty"."""
    p = incoming(
        soft(1, "zone", {}, matchLabelKeys=["foo"]),
        soft(1, HOST, {}, matchLabelKeys=["bar"]),
        labels={"foo": "", "bar": ""},
    )
    placed = (
        on("node-a", 1, {"foo": ""})
        + on("node-b", 1, {"foo": "", "bar": ""})
        + on("node-c", 1, {"foo": ""})
        + on("node-c", 1, {"bar": ""})
    )
    nodes = zoned(
        ("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")
    )
    assert topology_spread(p, nodes, placed) == {
        "node-a": 60,
        "node-b": 20,
        "node-c": 60,
        "node-d": 100,
    }


def test_match_label_keys_anded_with_a_selector() -> None:
    """ "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty"."""
    p = incoming(
        soft(1, "zone"),
        soft(1, HOST, BAR, matchLabelKeys=["baz"]),
        labels={"foo": "", "bar": "", "baz": ""},
    )
    placed = (
        on("node-a", 1, {"foo": ""})
        + on("node-b", 1, {"foo": "", "bar": "", "baz": ""})
        + on("node-c", 1, {"foo": ""})
        + on("node-c", 1, {"bar": ""})
        + on("node-c", 1, {"bar": "", "baz": ""})
    )
    nodes = zoned(
        ("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2")
    )
    assert topology_spread(p, nodes, placed) == {
        "node-a": 60,
        "node-b": 20,
        "node-c": 60,
        "node-d": 100,
    }


def test_pre_score_skips_a_pod_without_schedule_anyway() -> None:
    """``TestPreScoreSkip``: a pod whose constraints are all DoNotSchedule (or none) is
    not scored."""
    hard = soft(1, "zone") | {"whenUnsatisfiable": "DoNotSchedule"}
    assert topology_spread(incoming(hard), zoned(*ZONED4)) is None
    assert topology_spread(make_pod("p"), zoned(*ZONED4)) is None
