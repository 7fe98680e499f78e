"""PodTopologySpread's filter, following ``plugins/podtopologyspread/filtering_test.go``
(``TestSingleConstraint``, ``TestMultipleConstraints``)."""

from __future__ import annotations

import pytest
from tests.contract.rules_helpers import (
    BAR,
    allowed_nodes,
    incoming,
    make_node,
    make_pod,
    spread,
)

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.scheduler.podrules import topology_spread as pts
from tierra.scheduler.podrules.verdict import summary


def four_nodes() -> list[Node]:
    return [
        make_node("node-a", {"zone": "zone1", "node": "node-a"}),
        make_node("node-b", {"zone": "zone1", "node": "node-b"}),
        make_node("node-x", {"zone": "zone2", "node": "node-x"}),
        make_node("node-y", {"zone": "zone2", "node": "node-y"}),
    ]


def on(
    node: str, n: int, labels: dict[str, str] | None = None, namespace: str = "default"
) -> list[Pod]:
    return [
        make_pod(
            f"{node}-{namespace}-{i}",
            labels={"foo": ""} if labels is None else labels,
            node_name=node,
            namespace=namespace,
        )
        for i in range(n)
    ]


SPREAD_2103 = [*on("node-a", 2), *on("node-b", 1), *on("node-y", 3)]

CASES: list[tuple[str, Pod, list[Node], list[Pod], list[str]]] = [
    (
        "no existing pods",
        incoming(spread(1, "zone")),
        four_nodes(),
        [],
        ["node-a", "node-b", "node-x", "node-y"],
    ),
    (
        "no existing pods, incoming pod doesn't match itself",
        incoming(spread(1, "zone"), labels={"bar": ""}),
        four_nodes(),
        [],
        ["node-a", "node-b", "node-x", "node-y"],
    ),
    (
        "existing pods in a different namespace do not count",
        incoming(spread(1, "zone")),
        four_nodes(),
        [*on("node-a", 1, namespace="ns1"), *on("node-b", 1), *on("node-x", 2)],
        ["node-a", "node-b"],
    ),
    (
        "pods spread across zones as 3/3, all nodes fit",
        incoming(spread(1, "zone")),
        four_nodes(),
        [*on("node-a", 2), *on("node-b", 1), *on("node-x", 1), *on("node-y", 2)],
        ["node-a", "node-b", "node-x", "node-y"],
    ),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        incoming(spread(1, "zone")),
        [
            make_node("node-a", {"zone": "zone1", "node": "node-a"}),
            make_node("node-b", {"zon": "zone1", "node": "node-b"}),
            make_node("node-x", {"zone": "zone2", "node": "node-x"}),
            make_node("node-y", {"zone": "zone2", "node": "node-y"}),
        ],
        [*on("node-a", 1), *on("node-b", 1), *on("node-x", 1), *on("node-y", 1)],
        ["node-a"],
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        incoming(spread(1, "rack")),
        four_nodes()[::2],
        [],
        [],
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        incoming(spread(1, "node")),
        four_nodes(),
        SPREAD_2103,
        ["node-x"],
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        incoming(spread(2, "node")),
        four_nodes(),
        SPREAD_2103,
        ["node-b", "node-x"],
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        incoming(spread(1, "node"), labels={"bar": ""}),
        four_nodes(),
        SPREAD_2103,
        ["node-b", "node-x"],
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        incoming(
            spread(1, "node"),
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node",
                                        "operator": "In",
                                        "values": ["node-a", "node-y"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        four_nodes(),
        SPREAD_2103,
        ["node-a", "node-b", "node-x"],  # b, x: "in real case, it's false" (NodeAffinity)
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2,"
        " and the number of domains < minDomains, then the third node fits",
        incoming(spread(2, "node", minDomains=4)),
        [make_node(f"node-{c}", {"node": f"node-{c}"}) for c in "abc"],
        [*on("node-a", 2), *on("node-b", 2), *on("node-c", 1)],
        ["node-c"],
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2,"
        " and the number of domains > minDomains, then the all nodes fit",
        incoming(spread(2, "node", minDomains=2)),
        [make_node(f"node-{c}", {"node": f"node-{c}"}) for c in "abc"],
        [*on("node-a", 2), *on("node-b", 2), *on("node-c", 1)],
        ["node-a", "node-b", "node-c"],
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains,"
        " then the third and fourth nodes fit",
        incoming(spread(2, "zone", minDomains=3)),
        four_nodes(),
        [*on("node-a", 1), *on("node-b", 1), *on("node-y", 1)],
        ["node-x", "node-y"],
    ),
    (
        "NodeAffinityPolicy honored with labelSelectors",
        incoming(spread(1, "node"), nodeSelector={"foo": ""}),
        [
            make_node("node-a", {"node": "node-a", "foo": ""}),
            make_node("node-b", {"node": "node-b", "foo": ""}),
            make_node("node-x", {"node": "node-x", "foo": ""}),
            make_node("node-y", {"node": "node-y"}),
        ],
        [*on("node-a", 1), *on("node-b", 1), *on("node-y", 1)],
        ["node-x", "node-y"],
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        incoming(spread(1, "node", nodeAffinityPolicy="Ignore"), nodeSelector={"foo": ""}),
        [
            make_node("node-a", {"node": "node-a", "foo": ""}),
            make_node("node-b", {"node": "node-b", "foo": ""}),
            make_node("node-x", {"node": "node-x", "foo": ""}),
            make_node("node-y", {"node": "node-y"}),
        ],
        [*on("node-a", 1), *on("node-b", 1), *on("node-y", 1)],
        ["node-x"],
    ),
    (
        "existing pods do not match null selector",
        incoming(spread(1, "zone", selector=None)),
        four_nodes(),
        [*on("node-a", 1), *on("node-b", 1)],
        ["node-a", "node-b", "node-x", "node-y"],
    ),
]


@pytest.mark.parametrize(
    ("case", "pod", "nodes", "existing", "fits"), CASES, ids=[c[0] for c in CASES]
)
def test_single_constraint(
    case: str, pod: Pod, nodes: list[Node], existing: list[Pod], fits: list[str]
) -> None:
    assert allowed_nodes(pts.evaluate, pod, nodes, existing)[0] == fits


def _tainted(name: str, labels: dict[str, str]) -> Node:
    from dataclasses import replace

    from tierra.api.node import Taint, TaintEffect

    return replace(make_node(name, labels), taints=(Taint("foo", TaintEffect.NO_SCHEDULE),))


@pytest.mark.parametrize(
    ("policy", "fits"), [("Honor", ["node-x", "node-y"]), ("Ignore", ["node-x"])]
)
def test_node_taints_policy(policy: str, fits: list[str]) -> None:
    """ "NodeTaintsPolicy honored" / "NodeTaintsPolicy ignored": node-c is tainted; honored,
    its pods do not count and the minimum is 0 among a/b/x ... here node-y is tainted."""
    nodes = [
        make_node("node-a", {"node": "node-a"}),
        make_node("node-b", {"node": "node-b"}),
        make_node("node-x", {"node": "node-x"}),
        _tainted("node-y", {"node": "node-y"}),
    ]
    existing = [*on("node-a", 1), *on("node-b", 1), *on("node-y", 1)]
    pod = incoming(spread(1, "node", nodeTaintsPolicy=policy))
    assert allowed_nodes(pts.evaluate, pod, nodes, existing)[0] == fits


def test_multiple_constraints_are_anded() -> None:
    """TestMultipleConstraints, "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]":
    any zone fits, only node-x by node; the intersection is node-x."""
    pod = incoming(spread(1, "zone"), spread(1, "node"))
    ok, v = allowed_nodes(pts.evaluate, pod, four_nodes(), SPREAD_2103)
    assert ok == ["node-x"]
    assert v is not None
    assert summary(4, v.refusals) == (
        "1/4 nodes are available: 3 node(s) didn't match pod topology spread constraints."
    )


def test_multiple_constraints_with_no_common_node() -> None:
    """TestMultipleConstraints, "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]"."""
    pod = incoming(spread(1, "zone"), spread(1, "node"))
    existing = [*on("node-a", 2), *on("node-b", 1), *on("node-y", 4)]
    assert allowed_nodes(pts.evaluate, pod, four_nodes(), existing)[0] == []


def test_constraints_with_different_selectors() -> None:
    """TestMultipleConstraints, "Constraints hold different labelSelectors, spreads =
    [1/0, 1/0/0/1]": zone2 by foo, a/b/x by bar; node-x."""
    pod = incoming(
        spread(1, "zone"), spread(1, "node", selector=BAR), labels={"foo": "", "bar": ""}
    )
    existing = [*on("node-a", 1, labels={"foo": ""}), *on("node-y", 1, labels={"bar": ""})]
    assert allowed_nodes(pts.evaluate, pod, four_nodes(), existing)[0] == ["node-x"]


def test_match_label_keys_split_the_count_by_revision() -> None:
    """matchLabelKeys: only pods of the same revision count (``TestPreFilterState``,
    "matchLabelKeys")."""
    c = spread(1, "node", matchLabelKeys=["rev"])
    pod = incoming(c, labels={"foo": "", "rev": "2"})
    existing = [
        *on("node-a", 3, labels={"foo": "", "rev": "1"}),
        *on("node-b", 1, labels={"foo": "", "rev": "2"}),
    ]
    nodes = [make_node(f"node-{c}", {"node": f"node-{c}"}) for c in "ab"]
    assert allowed_nodes(pts.evaluate, pod, nodes, existing)[0] == ["node-a"]
