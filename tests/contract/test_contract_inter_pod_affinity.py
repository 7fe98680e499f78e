"""InterPodAffinity's filter, following ``plugins/interpodaffinity/filtering_test.go``
(``TestRequiredAffinitySingleNode``, ``TestRequiredAffinityMultipleNodes``)."""

from __future__ import annotations

from tests.contract.rules_helpers import (
    affinity,
    allowed_nodes,
    expr_term,
    make_node,
    make_pod,
    term,
)

from tierra.scheduler.podrules import inter_pod_affinity as ipa
from tierra.scheduler.podrules.verdict import summary

HOST = "kubernetes.io/hostname"
ZONE = "zone"
REGION = "region"
SEC = {"service": "securityscan"}


def _node1() -> list:  # type: ignore[type-arg]
    return [make_node("node1", {"region": "r1", "zone": "z11"})]


def test_single_node_no_rules_schedules_anywhere() -> None:
    """ "A pod that has no required pod affinity scheduling rules can schedule onto a node
    with no existing pods" (the filter is skipped)."""
    assert allowed_nodes(ipa.evaluate, make_pod("p"), _node1())[1] is None


def test_single_node_affinity_in_operator_matches_existing_pod() -> None:
    """ "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using
    In operator that matches the existing pod"."""
    t = expr_term(
        REGION, {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
    )
    p = make_pod("p", affinity=affinity("podAffinity", t))
    existing = make_pod("e", labels=SEC, node_name="node1")
    assert allowed_nodes(ipa.evaluate, p, _node1(), [existing])[0] == ["node1"]


def test_single_node_affinity_not_in_operator() -> None:
    """ "... using not in operator in labelSelector that matches the existing pod"."""
    t = expr_term(
        REGION, {"key": "service", "operator": "NotIn", "values": ["securityscan3", "value3"]}
    )
    p = make_pod("p", affinity=affinity("podAffinity", t))
    existing = make_pod("e", labels=SEC, node_name="node1")
    assert allowed_nodes(ipa.evaluate, p, _node1(), [existing])[0] == ["node1"]


def test_single_node_affinity_other_namespace_does_not_match() -> None:
    """ "Does not satisfy the PodAffinity with labelSelector because of diff Namespace"."""
    t = term(REGION, SEC, namespaces=["DiffNameSpace"])
    p = make_pod("p", affinity=affinity("podAffinity", t))
    existing = make_pod("e", labels=SEC, node_name="node1", namespace="ns")
    ok, v = allowed_nodes(ipa.evaluate, p, _node1(), [existing])
    assert ok == [] and v is not None
    assert (
        summary(1, v.refusals)
        == "0/1 nodes are available: 1 node(s) didn't match pod affinity rules."
    )


def test_single_node_affinity_selector_requirements_are_anded() -> None:
    """ "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot
    schedule onto the node because one of the matchExpression item don't match"."""
    t = expr_term(
        REGION,
        {"key": "service", "operator": "Exists"},
        {"key": "wrongkey", "operator": "DoesNotExist"},
        {"key": "service", "operator": "In", "values": ["WrongValue"]},
    )
    p = make_pod("p", affinity=affinity("podAffinity", t))
    existing = make_pod("e", labels=SEC, node_name="node1")
    assert allowed_nodes(ipa.evaluate, p, _node1(), [existing])[0] == []


def test_single_node_anti_affinity_refuses_and_symmetry_applies() -> None:
    """ "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing
    pod" and "... but doesn't satisfy PodAntiAffinity symmetry with the existing pod"."""
    aff = affinity("podAffinity", term(REGION, SEC))["podAffinity"]
    anti = affinity("podAntiAffinity", term(ZONE, SEC))["podAntiAffinity"]
    p = make_pod("p", affinity={"podAffinity": aff, "podAntiAffinity": anti})
    existing = make_pod("e", labels=SEC, node_name="node1")
    ok, v = allowed_nodes(ipa.evaluate, p, _node1(), [existing])
    assert ok == [] and v is not None
    assert [r.reason for r in v.refusals] == [ipa.ANTI_AFFINITY]
    # symmetry: the incoming pod has no anti-affinity, the existing pod refuses it
    plain = make_pod("q", labels=SEC)
    holder = make_pod(
        "e2",
        labels={"x": "y"},
        node_name="node1",
        affinity=affinity("podAntiAffinity", term(ZONE, SEC)),
    )
    ok, v = allowed_nodes(ipa.evaluate, plain, _node1(), [holder])
    assert ok == [] and v is not None
    assert [r.reason for r in v.refusals] == [ipa.EXISTING_ANTI_AFFINITY]


def test_single_node_pod_matching_its_own_affinity_goes_first() -> None:
    """ "pod matches its own Label in PodAffinity and that matches the existing pod Labels"
    and, across nodes, "The first pod of the collection can only be scheduled on nodes
    labelled with the requested topology keys"."""
    p = make_pod("p", labels=SEC, affinity=affinity("podAffinity", term(ZONE, SEC)))
    nodes = [make_node("a", {ZONE: "z1"}), make_node("b"), make_node("c", {ZONE: "z2"})]
    assert allowed_nodes(ipa.evaluate, p, nodes)[0] == ["a", "c"]


def test_multiple_nodes_affinity_follows_the_topology_value() -> None:
    """ "A pod can be scheduled onto all the nodes that have the same topology key & label
    value with one of them has an existing pod that matches the affinity rules"."""
    nodes = [
        make_node("nodeA", {ZONE: "az1", HOST: "h1"}),
        make_node("nodeB", {ZONE: "az2", HOST: "h2"}),
    ]
    p = make_pod("p", affinity=affinity("podAffinity", term(ZONE, {"foo": "bar"})))
    existing = make_pod("e", labels={"foo": "bar"}, node_name="nodeA")
    assert allowed_nodes(ipa.evaluate, p, nodes, [existing])[0] == ["nodeA"]


def test_multiple_nodes_anti_affinity_by_shared_value_spares_node_c() -> None:
    """ "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod
    that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and
    nodeB but can be scheduled onto nodeC" (and the namespaced variant)."""
    nodes = [
        make_node("nodeA", {ZONE: "az1"}),
        make_node("nodeB", {ZONE: "az1"}),
        make_node("nodeC", {ZONE: "az2"}),
    ]
    p = make_pod("p", affinity=affinity("podAntiAffinity", term(ZONE, {"foo": "123"})))
    on_a = make_pod("e", labels={"foo": "123"}, node_name="nodeA")
    other_ns = make_pod("f", labels={"foo": "123"}, node_name="nodeC", namespace="ns2")
    ok, v = allowed_nodes(ipa.evaluate, p, nodes, [on_a, other_ns])
    assert ok == ["nodeC"] and v is not None
    assert summary(3, v.refusals) == (
        "1/3 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    )


def test_multiple_nodes_existing_anti_affinity_topology_key_must_exist() -> None:
    """ "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one
    anti-affinity term matches incoming pod, so incoming pod can only be scheduled to
    nodeC"."""
    nodes = [
        make_node("nodeA", {"region": "r1", ZONE: "z1", HOST: "nodeA"}),
        make_node("nodeB", {"region": "r1", ZONE: "z2", HOST: "nodeB"}),
        make_node("nodeC", {"region": "r2", ZONE: "z3", HOST: "nodeC"}),
    ]
    anti = affinity(
        "podAntiAffinity",
        term("region", {"foo": "bar"}),
        term("invalid-node-label", {"bar": "foo"}),
    )
    held = [
        make_pod("a", node_name="nodeA", affinity=anti),
        make_pod("b", node_name="nodeB", affinity=anti),
    ]
    p = make_pod("p", labels={"foo": "bar", "bar": "foo"})
    assert allowed_nodes(ipa.evaluate, p, nodes, held)[0] == ["nodeC"]


def test_affinity_terms_must_match_on_the_same_pod() -> None:
    """ "Test incoming pod's affinity: firstly check if all affinityTerms match, and then
    check if all topologyKeys match, and the match logic should be satisfied on the same
    pod"."""
    nodes = [
        make_node("nodeA", {REGION: "r1", ZONE: "z1", HOST: "nodeA"}),
        make_node("nodeB", {REGION: "r1", ZONE: "z2", HOST: "nodeB"}),
    ]
    exists = [{"key": k, "operator": "Exists"} for k in ("foo", "bar")]
    p = make_pod(
        "p",
        affinity=affinity("podAffinity", expr_term(REGION, exists[0]), expr_term(ZONE, exists[1])),
    )
    placed = [
        make_pod("a", labels={"foo": ""}, node_name="nodeA"),
        make_pod("b", labels={"bar": ""}, node_name="nodeB"),
    ]
    assert allowed_nodes(ipa.evaluate, p, nodes, placed)[0] == []


def test_namespace_selector_affinity_and_anti_affinity() -> None:
    """ "affinity with NamespaceSelector", "affinity with non-matching NamespaceSelector",
    "anti-affinity with matching all NamespaceSelector"."""
    nodes = _node1()
    spaces = {"subteam": {"team": "team1"}, "other": {"team": "team2"}}
    existing = make_pod("e", labels=SEC, node_name="node1", namespace="subteam")
    sel = {"namespaceSelector": {"matchLabels": {"team": "team1"}}}
    p = make_pod("p", affinity=affinity("podAffinity", term(REGION, SEC, **sel)))
    assert allowed_nodes(ipa.evaluate, p, nodes, [existing], spaces)[0] == ["node1"]
    miss = {"namespaceSelector": {"matchLabels": {"team": "team2"}}}
    q = make_pod("q", affinity=affinity("podAffinity", term(REGION, SEC, **miss)))
    assert allowed_nodes(ipa.evaluate, q, nodes, [existing], spaces)[0] == []
    every = {"namespaceSelector": {}}
    r = make_pod("r", affinity=affinity("podAntiAffinity", term(ZONE, SEC, **every)))
    assert allowed_nodes(ipa.evaluate, r, nodes, [existing], spaces)[0] == []


def test_placing_and_removing_a_pod_updates_the_index() -> None:
    """The session overlay: a pod placed in this session refuses its anti-affinity peers;
    undone, it no longer does (``TestPreFilterStateAddRemovePod``)."""
    from tierra.scheduler.podrules.state import NodeTable, PodIndex

    nodes = NodeTable([make_node("a", {HOST: "a"}), make_node("b", {HOST: "b"})])
    index = PodIndex.of([], {})
    anti = affinity("podAntiAffinity", term(HOST, {"app": "x"}))
    first = make_pod("first", labels={"app": "x"}, affinity=anti)
    second = make_pod("second", labels={"app": "x"}, affinity=anti)
    index.add(first, "a")
    v = ipa.evaluate(second, nodes, index)
    assert v is not None and v.mask.tolist() == [False, True]
    index.remove(first.key)
    assert index.anti_terms == {}
    v = ipa.evaluate(second, nodes, index)
    assert v is not None and v.mask.tolist() == [True, True]
