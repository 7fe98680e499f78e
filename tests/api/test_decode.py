"""The one decoding front-end: what each metadata mode keeps, and problems passed through."""

from __future__ import annotations

from typing import Any

from tierra.api.decode import Meta, decode, split
from tierra.api.hypernode import decode_hypernode
from tierra.api.node import TaintEffect, decode_node
from tierra.api.pod import decode_pod
from tierra.errors import Severity

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "uid": "u1",
            "resourceVersion": "42",
            "managedFields": [{"manager": "kubelet"}],
            "annotations": {LAST_APPLIED: "{}", "keep": "me"},
        },
    }


def test_all_keeps_server_bookkeeping() -> None:
    node, problems = decode(decode_node, _node())
    assert problems == ()
    assert node.meta.extra["resourceVersion"] == "42"
    assert LAST_APPLIED in node.meta.annotations


def test_read_drops_extra_but_keeps_annotations() -> None:
    node, _ = decode(decode_node, _node(), meta=Meta.READ)
    assert node.meta.extra == {}
    assert dict(node.meta.annotations) == {LAST_APPLIED: "{}", "keep": "me"}
    # a change in bookkeeping only compares equal
    other = _node()
    other["metadata"]["resourceVersion"] = "43"
    assert decode(decode_node, other, meta=Meta.READ)[0] == node


def test_lean_drops_last_applied_too() -> None:
    node, _ = decode(decode_node, _node(), meta=Meta.LEAN)
    assert node.meta.extra == {}
    assert dict(node.meta.annotations) == {"keep": "me"}
    assert node.meta.uid == "u1"


def test_problems_name_the_field_and_split_by_severity() -> None:
    raw = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "rack-a"},
        "spec": {"tier": "one", "members": [{"type": "Node", "selector": {"exactMatch": {}}}]},
    }
    hn, problems = decode(decode_hypernode, raw)
    assert hn.name == "rack-a"
    errors, warnings = split(problems)
    assert errors and all(p.severity is Severity.ERROR for p in errors)
    assert all(p.severity is not Severity.ERROR for p in warnings)
    assert any("tier" in str(p) for p in errors)


def _pod(name: str, tolerations: list[Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c"}], "tolerations": tolerations},
    }


def test_tolerations_seen_before_decode_alike_and_a_bad_one_is_reported_every_time() -> None:
    usual = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
        {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
    ]
    first, again = (decode(decode_pod, _pod(n, usual))[0] for n in ("a", "b"))
    assert first.tolerations == again.tolerations
    assert [t.effect for t in first.tolerations] == [
        TaintEffect.NO_EXECUTE,
        TaintEffect.NO_SCHEDULE,
    ]
    bad = [{"key": "gpu", "operator": "Sometimes"}]
    for name in ("c", "d"):
        _, problems = decode(decode_pod, _pod(name, bad))
        (problem,) = problems
        assert problem.obj == f"Pod/default/{name}"
        assert problem.path == "spec.tolerations[0].operator"
