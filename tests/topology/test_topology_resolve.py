"""Member resolution keeps Volcano's semantics exactly (research/volcano.md §1.5).

HyperNodes here are decoded from manifests, as a user writes them, so each test also
shows the YAML shape whose meaning it pins down.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tierra.api import HyperNode, Node, ObjectMeta, decode_hypernode
from tierra.api.regex import compile_pattern
from tierra.errors import Problem, Severity
from tierra.topology import NodeCatalog, TopologyIndex, resolve


def _hypernode(
    name: str, members: list[dict[str, Any]], tier: int = 1
) -> tuple[HyperNode, list[Problem]]:
    problems: list[Problem] = []
    raw = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }
    return decode_hypernode(raw, None, problems), problems


def _node(name: str, labels: Mapping[str, str] | None = None) -> Node:
    return Node(meta=ObjectMeta(name=name, labels=dict(labels or {})))


def _members(hn: HyperNode, nodes: list[Node]) -> list[str]:
    ix = TopologyIndex.build(nodes, [hn])
    return ix.nodes_under(ix.ix[hn.name])


NODES = [_node(f"node-{i}") for i in (0, 1, 2, 10, 11, 21)]


def test_regex_is_an_unanchored_search() -> None:
    hn, problems = _hypernode(
        "s0", [{"type": "Node", "selector": {"regexMatch": {"pattern": "node-1"}}}]
    )
    assert problems == []
    assert _members(hn, NODES) == ["node-1", "node-10", "node-11"]
    anchored, _ = _hypernode(
        "s0", [{"type": "Node", "selector": {"regexMatch": {"pattern": "^node-1$"}}}]
    )
    assert _members(anchored, NODES) == ["node-1"]
    middle, _ = _hypernode("s0", [{"type": "Node", "selector": {"regexMatch": {"pattern": "e-2"}}}])
    assert _members(middle, NODES) == ["node-2", "node-21"]


def test_exact_node_member_counts_even_when_missing() -> None:
    hn, problems = _hypernode(
        "s0",
        [
            {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "node-99"}}},
        ],
    )
    assert problems == []
    ix = TopologyIndex.build(NODES, [hn])
    s0 = ix.ix["s0"]
    assert ix.nodes_under(s0) == ["node-0"]  # only existing nodes offer capacity
    assert ix.missing_nodes[s0] == ("node-99",)
    assert int(ix.node_counts[s0]) == 2  # but both count, as Volcano's nodeCount does
    assert int(ix.node_counts[ix.root]) == len(NODES)
    (warning,) = ix.problems
    assert warning.severity is Severity.WARNING
    assert warning.obj == "HyperNode/s0"
    assert "node-99" in warning.message
    assert resolve(hn, NodeCatalog(NODES)).missing_nodes == ("node-99",)


def test_empty_label_selector_matches_nothing() -> None:
    labelled = [_node("a", {"rack": "r1"}), _node("b", {})]
    for selector in ({}, {"matchLabels": {}}, {"matchExpressions": []}):
        hn, _ = _hypernode("s0", [{"type": "Node", "selector": {"labelMatch": selector}}])
        assert _members(hn, labelled) == [], selector
        assert int(TopologyIndex.build(labelled, [hn]).node_counts[0]) == 0


def test_label_selector_operators() -> None:
    nodes = [
        _node("a", {"rack": "r1", "gpu": "h100"}),
        _node("b", {"rack": "r2", "gpu": "h100"}),
        _node("c", {"rack": "r3"}),
        _node("d", {}),
    ]

    def match(selector: dict[str, Any]) -> list[str]:
        hn, problems = _hypernode("s0", [{"type": "Node", "selector": {"labelMatch": selector}}])
        assert problems == []
        return _members(hn, nodes)

    def expr(key: str, op: str, *values: str) -> dict[str, Any]:
        e: dict[str, Any] = {"key": key, "operator": op}
        if values:
            e["values"] = list(values)
        return {"matchExpressions": [e]}

    assert match({"matchLabels": {"rack": "r1"}}) == ["a"]
    assert match({"matchLabels": {"rack": "r1", "gpu": "a100"}}) == []
    assert match(expr("rack", "In", "r1", "r3")) == ["a", "c"]
    assert match(expr("rack", "NotIn", "r1")) == ["b", "c", "d"]  # a missing key is "not in"
    assert match(expr("gpu", "Exists")) == ["a", "b"]
    assert match(expr("gpu", "DoesNotExist")) == ["c", "d"]
    both = {"matchLabels": {"gpu": "h100"}, **expr("rack", "NotIn", "r1")}
    assert match(both) == ["b"]


def test_selectors_union_within_one_hypernode() -> None:
    hn, _ = _hypernode(
        "s0",
        [
            {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^node-2"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "node-21"}}},
        ],
    )
    assert _members(hn, NODES) == ["node-0", "node-2", "node-21"]


def test_hypernode_members_are_exact_names_only() -> None:
    leaf, _ = _hypernode(
        "leaf-a", [{"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}}]
    )
    other, _ = _hypernode(
        "leaf-b", [{"type": "Node", "selector": {"exactMatch": {"name": "node-1"}}}]
    )
    spine, problems = _hypernode(
        "spine",
        [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}},
            {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "leaf-"}}},
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"x": "y"}}}},
        ],
        tier=2,
    )
    assert [p.path for p in problems] == [
        "spec.members[1].selector.regexMatch",
        "spec.members[2].selector.labelMatch",
    ]
    assert resolve(spine, NodeCatalog(NODES)).hypernodes == ("leaf-a",)
    ix = TopologyIndex.build(NODES, [leaf, other, spine])
    assert [ix.names[c] for c in ix.children[ix.ix["spine"]]] == ["leaf-a"]
    assert int(ix.parent[ix.ix["leaf-b"]]) == ix.root  # not adopted by the regex
    # A HyperNode-typed exact member never names a node, even one with that name.
    by_node_name, _ = _hypernode(
        "s9", [{"type": "HyperNode", "selector": {"exactMatch": {"name": "node-0"}}}], tier=2
    )
    ix = TopologyIndex.build(NODES, [by_node_name])
    assert ix.nodes_under(ix.ix["s9"]) == []
    warnings = [p for p in ix.problems if p.severity is Severity.WARNING]
    assert any("does not exist" in p.message for p in warnings)


def test_regex_that_does_not_compile_matches_nothing_and_is_reported() -> None:
    hn, problems = _hypernode(
        "s0", [{"type": "Node", "selector": {"regexMatch": {"pattern": "node-("}}}]
    )
    (problem,) = problems
    assert problem.path == "spec.members[0].selector.regexMatch.pattern"
    assert "RE2" in problem.message
    ix = TopologyIndex.build(NODES, [hn], problems)
    assert ix.nodes_under(ix.ix["s0"]) == []
    tree = ix.tree(ix.ix["s0"])
    assert tree is not None
    assert not tree.usable  # a schema error makes its tree unusable, with the reason
    assert any("regexMatch.pattern" in r for r in tree.reasons)


def test_catastrophic_regex_over_ten_thousand_names_is_quick() -> None:
    """``(a+)+$`` backtracks exponentially in Python's ``re``; RE2 is linear."""
    names = [f"{'a' * 40}-{i}" for i in range(10_000)]  # a's, then no match at the end
    names += ["x-aaaa", "y-a"]  # these end in a's and must match
    nodes = [_node(n) for n in names]
    hn, problems = _hypernode(
        "s0", [{"type": "Node", "selector": {"regexMatch": {"pattern": "(a+)+$"}}}]
    )
    assert problems == []
    started = time.perf_counter()
    matched = _members(hn, nodes)
    elapsed = time.perf_counter() - started
    assert matched == ["x-aaaa", "y-a"]
    assert elapsed < 5.0  # a hang guard, not a performance assertion


names_st = st.lists(st.text(alphabet="ab-1.", min_size=0, max_size=6), max_size=25, unique=True)
literal_st = st.text(alphabet="ab-1", min_size=1, max_size=3)
tail_st = st.sampled_from(
    ["", "?", "*", "+", "{0,1}", "{2}", ".", "|b", "$", "(a)?", "[ab]", "\\d"]
)
pattern_st = st.one_of(
    st.builds(
        lambda anchor, a, t, b: f"{anchor}{a}{t}{b}",
        st.sampled_from(["^", ""]),
        literal_st,
        tail_st,
        st.sampled_from(["", "a", "$"]),
    ),
    st.text(alphabet="^ab-1.?*+{}2,()|[]\\d$", max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(names_st, pattern_st)
def test_regex_narrowing_by_literal_prefix_changes_nothing(names: list[str], pattern: str) -> None:
    """Patterns starting with literal text only search names holding it: same result."""
    compiled = compile_pattern(pattern)
    assume(not isinstance(compiled, str))
    assert not isinstance(compiled, str)
    catalog = NodeCatalog([_node(n) for n in names])
    assert catalog.match_regex(pattern) == [n for n in sorted(names) if compiled.search(n)]
