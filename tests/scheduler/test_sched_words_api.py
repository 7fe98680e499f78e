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


# -- tierra's and Kueue's annotations, on either kind of PodGroup -------------------------

VOLCANO_FIELDS = ("networkTopology", "highestTierName", "preferredTierName", "minMember", "mode:")
PREFERRED_NAME = "topology.tierra.dev/preferred-tier-name"
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def annotated(doc: dict[str, Any], **annotations: str) -> dict[str, Any]:
    doc["metadata"].setdefault("annotations", {}).update(annotations)
    return doc


def bare(kind: str, name: str, size: int, pod_annotations: dict[str, str]) -> list[dict[str, Any]]:
    """A gang whose PodGroup sets no topology of its own, its pods annotated."""
    return [
        podgroup(kind, name, size, key=None),
        *(annotated(pod(kind, f"{name}-{i}", name), **pod_annotations) for i in range(size)),
    ]


def no_volcano_words(kind: str, *texts: str) -> bool:
    """An upstream PodGroup is never told Volcano's fields."""
    return kind == VOLCANO or not any(w in t for t in texts for w in VOLCANO_FIELDS)


@pytest.mark.parametrize("kind", [UPSTREAM, VOLCANO])
def test_a_preferred_tier_annotation_naming_no_tier_is_named_as_the_annotation(
    tmp_path: Path, kind: str
) -> None:
    docs = gang(kind, "pref", 2)
    annotated(docs[0], **{PREFERRED_NAME: "nosuch"})
    found = reasons(tmp_path, kind, *docs)
    assert found["pref"].startswith(
        f"metadata.annotations[{PREFERRED_NAME}] 'nosuch' names no tier (known tier names: "
    )
    assert no_volcano_words(kind, found["pref"])


def test_a_preferred_tier_in_volcanos_spec_is_still_named_as_its_field(tmp_path: Path) -> None:
    docs = gang(VOLCANO, "pref", 2)
    docs[0]["spec"]["networkTopology"]["preferredTierName"] = "nosuch"
    found = reasons(tmp_path, VOLCANO, *docs)
    assert found["pref"].startswith("spec.networkTopology.preferredTierName 'nosuch' names no")


@pytest.mark.parametrize(
    ("kind", "clause"),
    [
        (UPSTREAM, ""),  # the Workload API has no soft mode to offer
        (VOLCANO, " (mode: soft takes any domain once the wait is over)"),
    ],
)
def test_a_bounded_wait_without_a_topology_is_told_its_own_field(
    tmp_path: Path, kind: str, clause: str
) -> None:
    docs = [podgroup(kind, "wait", 2, key=None), *(pod(kind, f"wait-{i}", "wait") for i in (0, 1))]
    annotated(
        docs[0],
        **{"topology.tierra.dev/wait-for-tier": "rack", "topology.tierra.dev/wait-for": "1m"},
    )
    found = reasons(tmp_path, kind, *docs)
    field = "spec.schedulingConstraints.topology" if kind == UPSTREAM else "spec.networkTopology"
    assert found["wait"] == (
        "metadata.annotations[topology.tierra.dev/wait-for-tier] needs "
        f"{field}: the wait narrows a topology search{clause}"
    )


@pytest.mark.parametrize("kind", [UPSTREAM, VOLCANO])
def test_a_kueue_level_too_small_is_told_in_kueues_words(tmp_path: Path, kind: str) -> None:
    """Five pods of 4 cpu under podset-required-topology: rack (racks hold two and three):
    the limit and the advice name Kueue's annotations, for either kind of PodGroup."""
    found = reasons(tmp_path, kind, *bare(kind, "kq", 5, {KUEUE_REQUIRED: RACK}))
    assert found["kq"].startswith(f"can never fit within {KUEUE_REQUIRED} {RACK}: even with")
    assert found["kq"].endswith(
        "to fit, allow tier 2 (kueue.x-k8s.io/podset-preferred-topology instead; the whole "
        "cluster could hold it) or shrink the gang to 3 pods"
    )
    assert no_volcano_words(UPSTREAM, found["kq"])


@pytest.mark.parametrize("kind", [UPSTREAM, VOLCANO])
def test_a_slice_layer_is_named_as_its_annotation(tmp_path: Path, kind: str) -> None:
    """tierra's slices annotation and Kueue's slice annotations: a slice of 4 pods no rack
    holds is told the layer as written."""
    docs = bare(kind, "ts", 4, {})
    layers = json.dumps([{"level": RACK, "size": 4}])
    annotated(docs[0], **{"topology.tierra.dev/slices": layers})
    kueue = bare(
        kind,
        "ks",
        4,
        {
            "kueue.x-k8s.io/podset-slice-required-topology": RACK,
            "kueue.x-k8s.io/podset-slice-size": "4",
        },
    )
    found = reasons(tmp_path, kind, *docs, *kueue)
    assert f"can never fit within topology.tierra.dev/slices[0] level {RACK}:" in found["ts"]
    assert (
        f"can never fit within kueue.x-k8s.io/podset-slice-required-topology {RACK}:"
        in (found["ks"])
    )
    assert no_volcano_words(kind, found["ts"], found["ks"])


@pytest.mark.parametrize(
    ("kind", "unconstrained"),
    [(UPSTREAM, "no spec.schedulingConstraints.topology"), (VOLCANO, "no networkTopology")],
)
def test_explain_says_a_gang_without_a_topology_in_its_own_words(
    tmp_path: Path, kind: str, unconstrained: str
) -> None:
    items = [node(i, r) for i, r in enumerate(["r1", "r1", "r2", "r2", "r2"])]
    docs = bare(kind, "free", 2, {})
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*items, *docs]}))
    code, out, _ = run("explain", "ml/free", path, "-o", "json")
    assert code == 0 and json.loads(out)["constraint"] == unconstrained


@pytest.mark.parametrize(
    ("kind", "field"),
    [(UPSTREAM, "spec.schedulingConstraints.topology"), (VOLCANO, "spec.networkTopology")],
)
def test_kueue_annotations_beside_the_podgroups_topology_name_its_own_field(
    tmp_path: Path, kind: str, field: str
) -> None:
    items = [node(i, r) for i, r in enumerate(["r1", "r1", "r2", "r2", "r2"])]
    if kind == VOLCANO:
        items += rack_tree()
    docs = gang(kind, "both", 2)
    for d in docs[1:]:
        annotated(d, **{KUEUE_REQUIRED: RACK})
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*items, *docs]}))
    _, out, _ = run("validate", path)
    text = one_line(out)
    assert f"PodGroup ml/both sets {field} and this pod Kueue's topology annotations" in text
    assert no_volcano_words(kind, text)
