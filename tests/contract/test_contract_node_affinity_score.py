"""NodeAffinity's score (preferred node affinity), following
``plugins/nodeaffinity/node_affinity_test.go`` ``TestNodeAffinityPriority`` case by case."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.contract.rules_helpers import make_pod
from tests.contract.score_helpers import bare_node, node_affinity

from tierra.api.labels import Operator, Requirement
from tierra.api.pod import NodeSelectorTerm
from tierra.scheduler.podrules import node_affinity_score
from tierra.scheduler.podrules.state import NodeTable

LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}


def _in(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": [value]}


def preferred(*terms: tuple[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": {"matchExpressions": exprs}} for w, exprs in terms
            ]
        }
    }


AFFINITY1 = preferred((2, [_in("foo", "bar")]))
AFFINITY2 = preferred(
    (2, [_in("foo", "bar")]),
    (4, [_in("key", "value")]),
    (5, [_in("foo", "bar"), _in("key", "value"), _in("az", "az1")]),
)


def test_all_nodes_are_same_priority_as_node_affinity_is_nil() -> None:
    """ "all nodes are same priority as NodeAffinity is nil" (and "Skip is returned in
    PreScore when NodeAffinity is nil": the pod has no rules to score)."""
    p = make_pod("p")
    nodes = [bare_node("node1", LABEL1), bare_node("node2", LABEL2), bare_node("node3", LABEL3)]
    assert node_affinity(p, nodes) == {"node1": 0, "node2": 0, "node3": 0}
    assert p.rules is None


def test_no_node_matches_the_preferred_terms() -> None:
    """ "no node matches preferred scheduling requirements in NodeAffinity of pod so all
    nodes' priority is zero"."""
    p = make_pod("p", affinity=AFFINITY1)
    nodes = [bare_node("node1", LABEL4), bare_node("node2", LABEL2), bare_node("node3", LABEL3)]
    assert node_affinity(p, nodes) == {"node1": 0, "node2": 0, "node3": 0}


def test_only_node1_matches() -> None:
    """ "only node1 matches the preferred scheduling requirements of pod"."""
    p = make_pod("p", affinity=AFFINITY1)
    nodes = [bare_node("node1", LABEL1), bare_node("node2", LABEL2), bare_node("node3", LABEL3)]
    assert node_affinity(p, nodes) == {"node1": 100, "node2": 0, "node3": 0}


def test_all_nodes_match_with_different_priorities() -> None:
    """ "all nodes matches the preferred scheduling requirements of pod but with different
    priorities" (and "calculate the priorities correctly even if PreScore is not
    called"): weights 2, 2+4+5, 4 give 18, 100, 36."""
    p = make_pod("p", affinity=AFFINITY2)
    nodes = [bare_node("node1", LABEL1), bare_node("node5", LABEL5), bare_node("node2", LABEL2)]
    assert node_affinity(p, nodes) == {"node1": 18, "node5": 100, "node2": 36}


def test_match_fields_on_the_node_name_and_empty_terms() -> None:
    """``PreferredSchedulingTerms`` (component-helpers ``nodeaffinity``): a term may match
    ``metadata.name`` by ``matchFields``; an empty term matches no node."""
    p = make_pod(
        "p",
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 3,
                        "preference": {"matchFields": [_in("metadata.name", "node2")]},
                    },
                    {"weight": 7, "preference": {}},
                ]
            }
        },
    )
    nodes = [bare_node("node1", LABEL1), bare_node("node2", LABEL2)]
    assert node_affinity(p, nodes) == {"node1": 0, "node2": 100}


KEYS = ("zone", "disk", "gen")
VALUES = ("a", "b", "1", "7")
requirements = st.builds(
    Requirement,
    st.sampled_from(KEYS),
    st.sampled_from(list(Operator)),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(
    labels=st.lists(
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3),
        min_size=1,
        max_size=6,
    ),
    exprs=st.lists(requirements, max_size=3),
    named=st.booleans(),
)
def test_vectorized_terms_match_as_the_api_term_does(
    labels: list[dict[str, str]], exprs: list[Requirement], named: bool
) -> None:
    """The table-wide matcher (label codes, no loop over nodes) agrees with
    ``NodeSelectorTerm.matches`` node by node, Gt/Lt, absent labels, matchFields and the
    empty term included."""
    fields = (Requirement("metadata.name", Operator.IN, ("n0", "n2")),) if named else ()
    term = NodeSelectorTerm(tuple(exprs), fields)
    nodes = [bare_node(f"n{i}", ls) for i, ls in enumerate(labels)]
    got = node_affinity_score._matching(term, NodeTable(nodes)).tolist()
    assert got == [term.matches(n.name, n.labels) for n in nodes]
