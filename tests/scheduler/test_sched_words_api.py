"""Messages speak the API of the PodGroup they are about: an upstream PodGroup
(``scheduling.k8s.io``, the Workload API) is told ``schedulingPolicy.gang.minCount`` and
its topology key, a Volcano PodGroup ``minMember`` and ``networkTopology``; and every
clause of advice is kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from run_cli import one_line, run
from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule

RACK = "example.com/rack"
UPSTREAM, VOLCANO = "upstream", "volcano"


def node(i: int, rack: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n{i}", "labels": {RACK: rack}},
        "status": {"allocatable": {"cpu": cpu, "pods": "10"}},
    }


def rack_tree() -> list[dict[str, Any]]:
    """Volcano PodGroups name tiers: give the racks HyperNodes with tier name ``rack``
    (upstream PodGroups get theirs from the node label; the same racks either way)."""
    out = []
    for rack, nodes in (("r1", ("n0", "n1")), ("r2", ("n2", "n3", "n4"))):
        out.append(
            {
                "apiVersion": "topology.tierra.dev/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": rack},
                "spec": {
                    "tier": 1,
                    "tierName": "rack",
                    "members": [
                        {"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes
                    ],
                },
            }
        )
    return out


def podgroup(kind: str, name: str, minimum: int, key: str | None = RACK) -> dict[str, Any]:
    if kind == UPSTREAM:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": minimum}}}
        if key:
            spec["schedulingConstraints"] = {"topology": [{"key": key}]}
        api = "scheduling.k8s.io/v1alpha2"
    else:
        spec = {"minMember": minimum}
        if key:
            spec["networkTopology"] = {
                "mode": "hard",
                "highestTierName": "rack" if key == RACK else key,
            }
        api = "scheduling.volcano.sh/v1beta1"
    return {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def pod(kind: str, name: str, group: str, cpu: str = "4", node_name: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "schedulerName": "tierra",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
    }
    if kind == UPSTREAM:
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
    else:
        body["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
    if node_name:
        body["spec"]["nodeName"] = node_name
        body["status"] = {"phase": "Running"}
    return body


def gang(
    kind: str, name: str, size: int, minimum: int | None = None, **pod_args: Any
) -> list[dict[str, Any]]:
    return [
        podgroup(kind, name, size if minimum is None else minimum),
        *(pod(kind, f"{name}-{i}", name, **pod_args) for i in range(size)),
    ]


def reasons(tmp_path: Path, kind: str, *docs: dict[str, Any], cpus: str = "4") -> dict[str, str]:
    items = [node(i, r, cpus) for i, r in enumerate(["r1", "r1", "r2", "r2", "r2"])]
    if kind == VOLCANO:
        items += rack_tree()
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*items, *docs]}))
    snapshot = load_snapshot([path])
    return {u.podgroup.split("/")[1]: u.reason for u in schedule(snapshot).unschedulable}


@pytest.mark.parametrize(
    ("kind", "minimum"),
    [(UPSTREAM, "schedulingPolicy.gang.minCount"), (VOLCANO, "minMember")],
)
def test_a_gang_short_of_pods_is_told_its_own_minimum_field(
    tmp_path: Path, kind: str, minimum: str
) -> None:
    found = reasons(tmp_path, kind, *gang(kind, "short", 2, minimum=3))
    assert found["short"] == f"{minimum} is 3 but the gang has only 2 pods (2 pending, 0 running)"


@pytest.mark.parametrize(
    ("kind", "limit", "allow"),
    [
        (UPSTREAM, f"topology key {RACK}", "drop spec.schedulingConstraints.topology"),
        (VOLCANO, "highestTierName: rack", "mode: soft"),
    ],
)
def test_a_gang_too_big_for_its_domain_is_told_the_change_in_its_own_fields(
    tmp_path: Path, kind: str, limit: str, allow: str
) -> None:
    found = reasons(tmp_path, kind, *gang(kind, "big", 4))
    assert found["big"].startswith(f"can never fit within {limit}: even with every node empty")
    assert found["big"].endswith(
        f"to fit, allow tier 2 ({allow}; the whole cluster could hold it) "
        "or shrink the gang to 3 pods"
    )
    assert "minMember" not in found["big"] or kind == VOLCANO


@pytest.mark.parametrize("kind", [UPSTREAM, VOLCANO])
def test_advice_keeps_its_first_clause_when_no_wider_domain_would_do(
    tmp_path: Path, kind: str
) -> None:
    """Six pods of 4 cpu fit no rack and not the whole cluster (five nodes): the advice is
    'add nodes or shrink', never a lone 'to fit, or shrink ...'."""
    found = reasons(tmp_path, kind, *gang(kind, "huge", 6))
    assert found["huge"].endswith("; to fit, add nodes or shrink the gang to 3 pods")
    assert "to fit, or" not in found["huge"]


@pytest.mark.parametrize(
    ("kind", "lower"),
    [(UPSTREAM, "lower schedulingPolicy.gang.minCount to 3"), (VOLCANO, "lower minMember to 3")],
)
def test_a_podgroup_without_pods_that_never_fits_is_told_its_own_field(
    tmp_path: Path, kind: str, lower: str
) -> None:
    """``tierra validate`` judges a PodGroup by its own minimum before its pods exist: six
    pods need six pod slots, one per node here; the racks hold two and three, the whole
    cluster five, so no wider tier would do either."""
    items = [node(i, r, "4") for i, r in enumerate(["r1", "r1", "r2", "r2", "r2"])]
    items = [{**n, "status": {"allocatable": {"cpu": "4", "pods": "1"}}} for n in items]
    if kind == VOLCANO:
        items += rack_tree()
    path = tmp_path / "s.json"
    items.append(podgroup(kind, "empty", 6))
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    _, out, _ = run("validate", path)
    text = one_line(out)
    assert (
        f"holds 5 of 6 pods; add nodes or {lower}" in text
        or f"to fit, add nodes or {lower}" in text
    )
    assert ("minMember" in text) == (kind == VOLCANO)


@pytest.mark.parametrize(
    ("kind", "minimum"),
    [(UPSTREAM, "schedulingPolicy.gang.minCount"), (VOLCANO, "minMember")],
)
def test_pods_beyond_the_minimum_are_named_by_its_own_field(
    tmp_path: Path, kind: str, minimum: str
) -> None:
    """Two pods of the gang run (its minimum); two more wait, with no room left."""
    docs = [
        podgroup(kind, "run", 2),
        pod(kind, "run-0", "run", node_name="n2"),
        pod(kind, "run-1", "run", node_name="n3"),
        pod(kind, "run-2", "run"),
        pod(kind, "run-3", "run"),
        *(pod(kind, f"fill-{i}", "", node_name=n) for i, n in enumerate(("n0", "n1", "n4"))),
    ]
    found = reasons(tmp_path, kind, *docs)
    assert found["run"].startswith(f"2 pending pods beyond {minimum}: ")


def test_an_upstream_key_no_node_carries_is_named_as_the_key(tmp_path: Path) -> None:
    found = reasons(
        tmp_path,
        UPSTREAM,
        podgroup(UPSTREAM, "nokey", 1, key="example.com/none"),
        pod(UPSTREAM, "nokey-0", "nokey"),
    )
    assert found["nokey"] == (
        "spec.schedulingConstraints.topology[0].key 'example.com/none' gives no domain: no "
        "node carries the label and no usable HyperNode was discovered from it; the gang "
        "waits rather than run unconstrained"
    )
