"""InterPodAffinity's score, following ``plugins/interpodaffinity/scoring_test.go``
(``TestPreferredAffinity``, ``TestPreferredAffinityWithHardPodAffinitySymmetricWeight``)
case by case. Upstream's pods have no namespace; here they share ``default``."""

from __future__ import annotations

from typing import Any

from tests.contract.rules_helpers import make_pod
from tests.contract.score_helpers import bare_node, inter_pod_affinity

from tierra.api.node import Node
from tierra.api.pod import Pod

CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}
NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}


def _term(weight: int, key: str, *exprs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "weight": weight,
        "podAffinityTerm": {
            "labelSelector": {"matchExpressions": list(exprs)},
            "topologyKey": key,
            **extra,
        },
    }


def _in(*values: str) -> dict[str, Any]:
    return {"key": "security", "operator": "In", "values": list(values)}


def _soft(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}


STAY_WITH_S1_IN_REGION = _soft("podAffinity", _term(5, "region", _in("S1")))
STAY_WITH_S2_IN_REGION = _soft("podAffinity", _term(6, "region", _in("S2")))
AFFINITY3 = _soft(
    "podAffinity",
    _term(
        8,
        "region",
        {"key": "security", "operator": "NotIn", "values": ["S1"]},
        {"key": "security", "operator": "In", "values": ["S2"]},
    ),
    _term(
        2,
        "region",
        {"key": "security", "operator": "Exists"},
        {"key": "wrongkey", "operator": "DoesNotExist"},
    ),
)
HARD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchExpressions": [_in("S1", "value2")]}, "topologyKey": "region"},
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "security", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "topologyKey": "region",
            },
        ]
    }
}
AWAY_FROM_S1_IN_AZ = _soft("podAntiAffinity", _term(5, "az", _in("S1")))
AWAY_FROM_S2_IN_AZ = _soft("podAntiAffinity", _term(5, "az", _in("S2")))
STAY_WITH_S1_AWAY_FROM_S2 = {
    **_soft("podAffinity", _term(8, "region", _in("S1"))),
    **_soft("podAntiAffinity", _term(5, "az", _in("S2"))),
}
NS_SELECTOR = {
    "namespaces": ["subteam2.team2"],
    "namespaceSelector": {
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]
    },
}
AFFINITY_NS = _soft("podAffinity", _term(5, "region", _in("S1"), **NS_SELECTOR))
ANTI_AFFINITY_NS = _soft("podAntiAffinity", _term(5, "region", _in("S1"), **NS_SELECTOR))

_count = iter(range(10_000))


def on(node: str, labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    return make_pod(f"e{next(_count)}", labels=labels or {}, node_name=node, **kw)


def nodes(*pairs: tuple[str, dict[str, str]]) -> list[Node]:
    return [bare_node(n, labels) for n, labels in pairs]


def test_all_nodes_same_priority_as_affinity_is_nil() -> None:
    """ "all nodes are same priority as Affinity is nil" (PreScore: Skip)."""
    p = make_pod("p", labels=S1)
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    assert inter_pod_affinity(p, ns) is None


def test_affinity_matching_topology_key_and_pods_scores_high() -> None:
    """ "Affinity: pod that matches topology key & pods in nodes will get high score
    comparing to others which doesn't match either pods in nodes or in topology key"."""
    p = make_pod("p", labels=S1, affinity=STAY_WITH_S1_IN_REGION)
    placed = [on("node1", S1), on("node2", S2), on("node3", S1)]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 100, "node2": 0, "node3": 0}


def test_nodes_sharing_the_topology_value_score_the_same() -> None:
    """ "All the nodes that have the same topology key & label value with one of them has
    an existing pod that match the affinity rules, have the same score"."""
    p = make_pod("p", affinity=STAY_WITH_S1_IN_REGION)
    ns = nodes(("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA))
    assert inter_pod_affinity(p, ns, [on("node1", S1)]) == {"node1": 100, "node2": 100, "node3": 0}


def test_the_region_with_more_matches_scores_higher() -> None:
    """ "Affinity: nodes in one region has more matching pods comparing to other region,
    so the region which has more matches will get high score"."""
    p = make_pod("p", labels=S1, affinity=STAY_WITH_S2_IN_REGION)
    placed = [on(n, S2) for n in ("node1", "node1", "node2", "node3", "node4", "node5")]
    ns = nodes(
        ("node1", CHINA), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)
    )
    got = inter_pod_affinity(p, ns, placed)
    assert got == {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}


def test_different_operators_including_failures() -> None:
    """ "Affinity: different Label operators and values for pod affinity scheduling
    preference, including some match failures"."""
    p = make_pod("p", labels=S1, affinity=AFFINITY3)
    placed = [on("node1", S1), on("node2", S2), on("node3", S1)]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 20, "node2": 100, "node3": 0}


def test_affinity_symmetry_preferred_terms_of_existing_pods() -> None:
    """ "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuring
    Execution in pod affinity symmetry" (and "Do not ignore preferred terms of existing
    pods")."""
    p = make_pod("p", labels=S2)
    placed = [
        on("node1", S1, affinity=STAY_WITH_S1_IN_REGION),
        on("node2", S2, affinity=STAY_WITH_S2_IN_REGION),
    ]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 0, "node2": 100, "node3": 0}


def test_affinity_symmetry_with_namespace_selector() -> None:
    """ "Affinity symmetry with namespace selector"."""
    p = make_pod("p", labels=S1, namespace="subteam1.team1")
    placed = [
        on("node1", S1, affinity=AFFINITY_NS),
        on("node2", S2, affinity=STAY_WITH_S2_IN_REGION),
    ]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    got = inter_pod_affinity(p, ns, placed, NAMESPACES)
    assert got == {"node1": 100, "node2": 0, "node3": 0}


def test_anti_affinity_symmetry_with_namespace_selector() -> None:
    """ "AntiAffinity symmetry with namespace selector"."""
    p = make_pod("p", labels=S1, namespace="subteam1.team1")
    placed = [
        on("node1", S1, affinity=ANTI_AFFINITY_NS),
        on("node2", S2, affinity=STAY_WITH_S2_IN_REGION),
    ]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    got = inter_pod_affinity(p, ns, placed, NAMESPACES)
    assert got == {"node1": 0, "node2": 100, "node3": 100}


def test_affinity_symmetry_required_terms_of_existing_pods() -> None:
    """ "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in
    pod affinity symmetry" (hardPodAffinityWeight 1)."""
    p = make_pod("p", labels=S1)
    placed = [on("node1", S1, affinity=HARD_AFFINITY), on("node2", S2, affinity=HARD_AFFINITY)]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 100, "node2": 100, "node3": 0}


def test_anti_affinity_pod_not_matching_existing_pods_scores_high() -> None:
    """ "Anti Affinity: pod that does not match existing pods in node will get high
    score"."""
    p = make_pod("p", labels=S1, affinity=AWAY_FROM_S1_IN_AZ)
    ns = nodes(("node1", AZ1), ("node2", CHINA))
    assert inter_pod_affinity(p, ns, [on("node1", S1), on("node2", S2)]) == {
        "node1": 0,
        "node2": 100,
    }


def test_anti_affinity_node_without_the_topology_key_scores_high() -> None:
    """ "Anti Affinity: pod that does not match topology key & match the pods in nodes
    will get higher score comparing to others"."""
    p = make_pod("p", labels=S1, affinity=AWAY_FROM_S1_IN_AZ)
    ns = nodes(("node1", AZ1), ("node2", CHINA))
    assert inter_pod_affinity(p, ns, [on("node1", S1), on("node2", S1)]) == {
        "node1": 0,
        "node2": 100,
    }


def test_anti_affinity_more_matches_score_lower() -> None:
    """ "Anti Affinity: one node has more matching pods comparing to other node, so the
    node which has more unmatches will get high score"."""
    p = make_pod("p", labels=S1, affinity=AWAY_FROM_S1_IN_AZ)
    placed = [on("node1", S1), on("node1", S1), on("node2", S2)]
    ns = nodes(("node1", AZ1), ("node2", INDIA))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 0, "node2": 100}


def test_anti_affinity_symmetry() -> None:
    """ "Anti Affinity symmetry: the existing pods in node which has anti affinity match
    will get high score"."""
    p = make_pod("p", labels=S2)
    placed = [
        on("node1", S1, affinity=AWAY_FROM_S2_IN_AZ),
        on("node2", S2, affinity=AWAY_FROM_S1_IN_AZ),
    ]
    ns = nodes(("node1", AZ1), ("node2", AZ2))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 0, "node2": 100}


def test_affinity_and_anti_affinity_preferred_only() -> None:
    """ "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnored
    DuringExecution in both pod affinity & anti affinity"."""
    p = make_pod("p", labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2)
    ns = nodes(("node1", CHINA), ("node2", AZ1))
    assert inter_pod_affinity(p, ns, [on("node1", S1), on("node2", S1)]) == {
        "node1": 100,
        "node2": 0,
    }


def test_affinity_and_anti_affinity_with_same_labels() -> None:
    """ "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod
    to schedule and existing pods have the same labels"."""
    p = make_pod("p", labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2)
    placed = [on(n, S1) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")]
    ns = nodes(
        ("node1", CHINA_AZ1), ("node2", INDIA), ("node3", CHINA), ("node4", CHINA), ("node5", INDIA)
    )
    got = inter_pod_affinity(p, ns, placed)
    assert got == {"node1": 100, "node2": 0, "node3": 100, "node4": 100, "node5": 0}


def test_affinity_anti_affinity_and_symmetry_together() -> None:
    """ "Affinity and Anti Affinity and symmetry: considered only preferredDuringScheduling
    IgnoredDuringExecution in both pod affinity & anti affinity & symmetry": 8, -5, 8, -5."""
    p = make_pod("p", labels=S1, affinity=STAY_WITH_S1_AWAY_FROM_S2)
    placed = [
        on("node1", S1),
        on("node2", S2),
        on("node3", affinity=STAY_WITH_S1_AWAY_FROM_S2),
        on("node4", affinity=AWAY_FROM_S1_IN_AZ),
    ]
    ns = nodes(("node1", CHINA), ("node2", AZ1), ("node3", INDIA), ("node4", AZ2))
    got = inter_pod_affinity(p, ns, placed)
    assert got == {"node1": 100, "node2": 0, "node3": 100, "node4": 0}


def test_partial_nodes_in_a_topology_without_affinity_pods() -> None:
    """ "Avoid panic when partial nodes in a topology don't have pods with affinity"."""
    p = make_pod("p", labels=S1)
    placed = [on("node1", S1), on("node2", affinity=STAY_WITH_S1_AWAY_FROM_S2)]
    ns = nodes(("node1", CHINA), ("node2", CHINA))
    assert inter_pod_affinity(p, ns, placed) == {"node1": 0, "node2": 0}


def test_affinity_with_pods_matching_namespace_selector() -> None:
    """ "Affinity with pods matching NamespaceSelector" and "... matching both
    NamespaceSelector and Namespaces fields" (affinity, then anti-affinity)."""
    ns = nodes(("node1", CHINA), ("node2", INDIA))
    for third in ("subteam1.team2", "subteam2.team2"):
        placed = [
            on("node1", S1, namespace="subteam1.team1"),
            on("node1", S1, namespace="subteam1.team1"),
            on("node1", S1, namespace=third),
            on("node2", S1, namespace="subteam2.team1"),
        ]
        p = make_pod("p", labels=S1, namespace="subteam1.team1", affinity=AFFINITY_NS)
        assert inter_pod_affinity(p, ns, placed, NAMESPACES) == {"node1": 100, "node2": 0}
        q = make_pod("q", labels=S1, namespace="subteam1.team1", affinity=ANTI_AFFINITY_NS)
        assert inter_pod_affinity(q, ns, placed, NAMESPACES) == {"node1": 0, "node2": 100}


def test_no_nodes_to_score() -> None:
    """ "No nodes to score" (Skip)."""
    assert inter_pod_affinity(make_pod("p", labels=S2), []) is None


HARD_POD_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "service", "operator": "In", "values": ["S1"]}]
                },
                "namespaces": ["default", "subteam2.team2"],
                "namespaceSelector": {
                    "matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]
                },
                "topologyKey": "region",
            }
        ]
    }
}


def _hard_case(namespace: str, weight: int) -> dict[str, int] | None:
    p = make_pod("p", labels={"service": "S1"}, namespace=namespace)
    placed = [on("node1", affinity=HARD_POD_AFFINITY), on("node2", affinity=HARD_POD_AFFINITY)]
    ns = nodes(("node1", CHINA), ("node2", INDIA), ("node3", AZ1))
    return inter_pod_affinity(p, ns, placed, NAMESPACES, hard_weight=weight)


def test_hard_pod_affinity_symmetric_weight() -> None:
    """``TestPreferredAffinityWithHardPodAffinitySymmetricWeight``: "with default weight",
    "with zero weight" (Skip), "with no matching namespace" (Skip), "with matching
    NamespaceSelector", "with matching Namespaces". Upstream's "" namespace is
    ``default`` here."""
    want = {"node1": 100, "node2": 100, "node3": 0}
    assert _hard_case("default", 1) == want
    assert _hard_case("default", 0) is None
    assert _hard_case("subteam1.team2", 1) is None
    assert _hard_case("subteam1.team1", 1) == want
    assert _hard_case("subteam2.team2", 1) == want
