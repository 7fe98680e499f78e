"""HyperNodes of both groups: schema problems, and lossless conversion between groups."""

from __future__ import annotations

from typing import Any

import pytest

from tierra.api import TIERRA_GROUP, VOLCANO_GROUP, decode_hypernode, encode_hypernode
from tierra.errors import Problem


def hn(
    spec: dict[str, Any], *, group: str = TIERRA_GROUP, name: str = "s4", **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
        **extra,
    }


def problems_of(raw: dict[str, Any]) -> list[Problem]:
    sink: list[Problem] = []
    decode_hypernode(raw, None, sink)
    return sink


def node_member(selector: dict[str, Any], kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": selector}


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"tier": 1, "members": [node_member({})]}, "spec.members[0].selector", "got none"),
        (
            {
                "tier": 1,
                "members": [
                    node_member({"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}})
                ],
            },
            "spec.members[0].selector",
            "got exactMatch and regexMatch",
        ),
        (
            {"tier": 1, "members": [node_member({"exactMatch": {"name": "Node_1"}})]},
            "spec.members[0].selector.exactMatch.name",
            "DNS subdomain",
        ),
        (
            {"tier": 1, "members": [node_member({"regexMatch": {"pattern": "(a"}})]},
            "spec.members[0].selector.regexMatch.pattern",
            "RE2",
        ),
        (
            {"tier": -1, "members": [node_member({"exactMatch": {"name": "a"}})]},
            "spec.tier",
            ">= 0",
        ),
        (
            {"tier": 1.5, "members": [node_member({"exactMatch": {"name": "a"}})]},
            "spec.tier",
            "integer",
        ),
        (
            {"tier": "2", "members": [node_member({"exactMatch": {"name": "a"}})]},
            "spec.tier",
            "integer",
        ),
        ({"tier": 1, "members": []}, "spec.members", "at least one member"),
        ({"tier": 1}, "spec.members", "at least one member"),
        ({"members": [node_member({"exactMatch": {"name": "a"}})]}, "spec.tier", "required"),
        (
            {"tier": 2, "members": [node_member({"regexMatch": {"pattern": "s.*"}}, "HyperNode")]},
            "spec.members[0].selector.regexMatch",
            "exactMatch only",
        ),
        (
            {"tier": 1, "members": [node_member({"exactMatch": {"name": "a"}}, "Rack")]},
            "spec.members[0].type",
            "Node or HyperNode",
        ),
        (
            {
                "tier": 1,
                "members": [
                    node_member(
                        {"labelMatch": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}
                    )
                ],
            },
            "spec.members[0].selector.labelMatch.matchExpressions[0].operator",
            "must be one of",
        ),
    ],
)
def test_schema_problems_name_the_field(spec: dict[str, Any], path: str, fragment: str) -> None:
    found = problems_of(hn(spec))
    assert any(
        p.path == path and fragment in p.message and p.obj == "HyperNode/s4" for p in found
    ), found


def exact(name: str) -> dict[str, Any]:
    return {"tier": 1, "members": [node_member({"exactMatch": {"name": name}})]}


# Volcano's admission: the CRD's maxLength on tierName and pattern on exact names, and the
# ValidatingAdmissionPolicy (installer/helm/chart/volcano/policy/hypernodes-validating.yaml):
# "member exactMatch name is required" and format.qualifiedName() on every exact name.
@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        (exact(""), "spec.members[0].selector.exactMatch.name", "must not be empty"),
        (exact("n" * 64), "spec.members[0].selector.exactMatch.name", "at most 63"),
        (exact("a." + "b" * 70), "spec.members[0].selector.exactMatch.name", "qualified name"),
        ({**exact("n0"), "tierName": "t" * 254}, "spec.tierName", "at most 253 characters"),
    ],
    ids=["empty exact name", "64 characters", "long dotted name", "tierName of 254"],
)
def test_volcano_admission_rules(spec: dict[str, Any], path: str, fragment: str) -> None:
    for group in (TIERRA_GROUP, VOLCANO_GROUP):
        found = problems_of(hn(spec, group=group))
        assert [p.path for p in found] == [path], found
        assert fragment in found[0].message


@pytest.mark.parametrize("name", ["n" * 63, "gpu-node.rack-1", "a"])
def test_names_volcano_admits_pass(name: str) -> None:
    assert problems_of(hn({**exact(name), "tierName": "t" * 253})) == []


def test_discovered_names_fit_an_exact_match() -> None:
    from tierra.discovery import naming

    long = naming.join("labels", "topology.kubernetes.io/zone", "x" * 300)
    assert len(long) <= 63
    assert problems_of(hn(exact(long))) == []
    clashing = naming.unique_names({1: "y" * 63, 2: "y" * 63})
    assert all(problems_of(hn(exact(n))) == [] for n in clashing.values())


def test_bad_name() -> None:
    found = problems_of(
        hn({"tier": 1, "members": [node_member({"exactMatch": {"name": "a"}})]}, name="S_4")
    )
    assert [p.path for p in found] == ["metadata.name"]


def test_valid_volcano_object_has_no_problems() -> None:
    raw = hn(
        {
            "tier": 1,
            "tierName": "volcano.sh/tor",
            "members": [
                node_member({"exactMatch": {"name": "node-0"}}),
                node_member({"regexMatch": {"pattern": "^gpu-rack1-"}}),
                node_member({"labelMatch": {"matchLabels": {"topology-rack": "rack1"}}}),
            ],
        },
        group=VOLCANO_GROUP,
    )
    assert problems_of(raw) == []


def test_round_trip_through_both_groups_loses_nothing() -> None:
    raw = hn(
        {
            "tier": 2,
            "tierName": "spine",
            "members": [node_member({"exactMatch": {"name": "s0"}}, "HyperNode")],
            "link": {"medium": "InfiniBand", "bandwidthGBps": 50.0, "oversubscription": 2.0},
        },
        status={
            "nodeCount": 4,
            "conditions": [{"type": "Degraded", "status": "True", "reason": "NodeNotReady"}],
            "unhealthyNodes": [{"name": "n3", "reason": "NotReady"}],
        },
    )
    raw["metadata"]["labels"] = {"a": "b"}
    raw["metadata"]["resourceVersion"] = "42"
    sink: list[Problem] = []
    original = decode_hypernode(raw, None, sink)
    as_volcano = encode_hypernode(original, VOLCANO_GROUP)
    assert as_volcano["apiVersion"] == "topology.volcano.sh/v1alpha1"
    assert "link" not in as_volcano["spec"]  # Volcano's schema would prune it
    back = decode_hypernode(as_volcano, None, sink)
    assert sink == []
    assert encode_hypernode(back, TIERRA_GROUP) == raw
