"""tierra's and Volcano's CRDs on a real API server: what they accept, what they refuse, and
how ``kubectl get`` shows them.

The schema rules (one selector per member, tier >= 0, name patterns) are CEL and OpenAPI
rules evaluated by the API server itself, so they can only be proven against one.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube

# The top-level conftest's ``fixtures``; read at import for parametrize.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-topology-crds"
OUR_KINDS = {
    ("topology.volcano.sh/v1alpha1", "HyperNode"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    ("scheduling.volcano.sh/v1beta1", "Queue"),
}

TIERRA_HN = "topology.tierra.dev/v1alpha1"
VOLCANO_HN = "topology.volcano.sh/v1alpha1"


def create(plane: ControlPlane, obj: dict[str, Any]) -> str:
    """Create ``obj`` with kubectl; return the error text ("" when it was accepted)."""
    result = plane.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
    return "" if result.returncode == 0 else result.stderr.strip()


def hypernode(
    name: str, members: list[dict[str, Any]], *, tier: int = 1, api: str = TIERRA_HN, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members, **spec},
    }


def node_member(selector: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Node", "selector": selector}


def fixture_documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(FIXTURES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and (doc.get("apiVersion"), doc.get("kind")) in OUR_KINDS:
                out.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return out


FIXTURE_DOCS = fixture_documents()


def test_fixture_folder_has_volcano_objects(fixtures: Path) -> None:
    assert fixtures / "k8s-topology-crds" == FIXTURES
    assert len(FIXTURE_DOCS) >= 8


def test_crds_are_established(crds: ControlPlane) -> None:
    out = crds.kubectl("api-resources", "--api-group=topology.tierra.dev", "-o", "wide").stdout
    assert "hypernodes" in out and "thn" in out
    out = crds.kubectl("api-resources", "--api-group=scheduling.volcano.sh").stdout
    assert "podgroups" in out and "queues" in out


@pytest.mark.parametrize("label_and_doc", FIXTURE_DOCS, ids=[label for label, _ in FIXTURE_DOCS])
def test_volcano_fixture_is_accepted(
    crds: ControlPlane, label_and_doc: tuple[str, dict[str, Any]]
) -> None:
    _, doc = label_and_doc
    doc = copy.deepcopy(doc)
    # Fixture files reuse names (s0 appears twice); apply is idempotent across them.
    result = crds.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "label_and_doc", [d for d in FIXTURE_DOCS if d[1]["kind"] == "HyperNode"], ids=lambda d: d[0]
)
def test_volcano_hypernode_is_valid_as_tierra_hypernode(
    crds: ControlPlane, label_and_doc: tuple[str, dict[str, Any]]
) -> None:
    """tierra's group is a superset: Volcano's objects moved to it unchanged still validate."""
    _, doc = label_and_doc
    doc = copy.deepcopy(doc)
    doc["apiVersion"] = TIERRA_HN
    doc["metadata"] = {"name": "fixture-" + doc["metadata"]["name"]}
    result = crds.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)
    assert result.returncode == 0, result.stderr


def test_volcano_podgroup_and_queue_are_accepted(crds: ControlPlane, namespace: str) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {
            "weight": 4,
            "reclaimable": True,
            "capability": {"cpu": "512", "memory": "2Ti", "nvidia.com/gpu": 64},
            "deserved": {"cpu": "256", "nvidia.com/gpu": "32"},
            "guarantee": {"resource": {"nvidia.com/gpu": "8"}},
            "parent": "root",
        },
    }
    assert create(crds, queue) == ""
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "llm-train", "namespace": namespace},
        "spec": {
            "minMember": 16,
            "minTaskMember": {"worker": 16},
            "queue": "research",
            "priorityClassName": "system-cluster-critical",
            "minResources": {"nvidia.com/gpu": "128", "cpu": "64"},
            "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
            "subGroupPolicy": [
                {
                    "name": "worker",
                    "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                    "matchLabelKeys": ["volcano.sh/partition-id"],
                    "subGroupSize": 8,
                    "minSubGroups": 2,
                    "networkTopology": {"mode": "soft", "highestTierName": "nvlink"},
                }
            ],
        },
    }
    assert create(crds, podgroup) == ""
    stored = json.loads(
        crds.kubectl(
            "get", "podgroups.scheduling.volcano.sh", "llm-train", "-n", namespace, "-o", "json"
        ).stdout
    )
    assert stored["spec"]["networkTopology"]["highestTierAllowed"] == 2
    # Defaults declared in the schema are applied by the API server.
    plain = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "plain", "namespace": namespace},
        "spec": {"minMember": 1, "networkTopology": {}},
    }
    assert create(crds, plain) == ""
    stored = json.loads(
        crds.kubectl(
            "get", "podgroups.scheduling.volcano.sh", "plain", "-n", namespace, "-o", "json"
        ).stdout
    )
    assert stored["spec"]["queue"] == "default"
    assert stored["spec"]["networkTopology"]["mode"] == "hard"


def test_podgroup_rejects_unknown_mode(crds: ControlPlane, namespace: str) -> None:
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "bad-mode", "namespace": namespace},
        "spec": {"minMember": 2, "networkTopology": {"mode": "strict"}},
    }
    error = create(crds, podgroup)
    assert 'spec.networkTopology.mode: Unsupported value: "strict"' in error


def test_queue_rejects_zero_weight(crds: ControlPlane) -> None:
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "zero-weight"},
        "spec": {"weight": 0},
    }
    assert (
        "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"
        in create(crds, queue)
    )


def test_tierra_hypernode_with_extras_is_accepted(crds: ControlPlane) -> None:
    obj = hypernode(
        "nvl-rack-1",
        [
            node_member({"exactMatch": {"name": "gb200-0"}}),
            node_member({"regexMatch": {"pattern": "^gb200-rack1-[0-9]+$"}}),
            node_member(
                {
                    "labelMatch": {
                        "matchLabels": {"nvidia.com/gpu.clique": "rack1"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}],
                    }
                }
            ),
        ],
        tierName="nvlink",
        link={
            "medium": "nvlink",
            "bandwidthGBps": 900,
            "latencyMicroseconds": 0.5,
            "oversubscription": 1,
        },
    )
    assert create(crds, obj) == ""
    spine = hypernode(
        "spine-1",
        [{"type": "HyperNode", "selector": {"exactMatch": {"name": "nvl-rack-1"}}}],
        tier=2,
    )
    assert create(crds, spine) == ""


def test_tierra_encoder_output_is_accepted(crds: ControlPlane) -> None:
    """What tierra.api writes for its own group is what the CRD admits."""
    api = pytest.importorskip("tierra.api.hypernode")
    for name, tier in (("encoded-leaf", 1), ("encoded-spine", 2)):
        raw = hypernode(
            name,
            [node_member({"exactMatch": {"name": "n0"}})]
            if tier == 1
            else [{"type": "HyperNode", "selector": {"exactMatch": {"name": "encoded-leaf"}}}],
            tier=tier,
            tierName="leaf" if tier == 1 else "spine",
            link={
                "medium": "infiniband",
                "bandwidthGBps": 50.0,
                "latencyMicroseconds": 1.2,
                "oversubscription": 2.0,
            },
        )
        problems: list[Any] = []
        decoded = api.decode_hypernode(raw, None, problems)
        assert problems == []
        encoded = api.encode_hypernode(decoded)
        encoded.pop("status", None)
        assert create(crds, encoded) == "", encoded


# (object, the error text the API server must give). Volcano's group keeps Volcano's messages.
REJECTED = {
    "two selectors": (
        hypernode(
            "two-selectors",
            [node_member({"exactMatch": {"name": "n0"}, "regexMatch": {"pattern": "n"}})],
        ),
        "a member selector takes only one of exactMatch, regexMatch or labelMatch",
    ),
    "three selectors": (
        hypernode(
            "three-selectors",
            [
                node_member(
                    {
                        "exactMatch": {"name": "n0"},
                        "regexMatch": {"pattern": "n"},
                        "labelMatch": {"matchLabels": {"a": "b"}},
                    }
                )
            ],
        ),
        "a member selector takes only one of exactMatch, regexMatch or labelMatch",
    ),
    "empty selector": (
        hypernode("empty-selector", [node_member({})]),
        "a member selector needs one of exactMatch, regexMatch or labelMatch",
    ),
    "no selector": (
        hypernode("no-selector", [{"type": "Node"}]),
        "spec.members[0].selector: Required value",
    ),
    "negative tier": (
        hypernode("negative-tier", [node_member({"exactMatch": {"name": "n0"}})], tier=-1),
        "spec.tier: Invalid value: -1: spec.tier in body should be greater than or equal to 0",
    ),
    "no members": (
        hypernode("no-members", []),
        "spec.members: Invalid value: 0: spec.members in body should have at least 1 items",
    ),
    "unknown member type": (
        hypernode("bad-type", [{"type": "Rack", "selector": {"exactMatch": {"name": "n0"}}}]),
        'spec.members[0].type: Unsupported value: "Rack"',
    ),
    "bad exact name": (
        hypernode("bad-name", [node_member({"exactMatch": {"name": "Node_0"}})]),
        "spec.members[0].selector.exactMatch.name: Invalid value",
    ),
    "empty exact name": (
        hypernode("empty-name", [node_member({"exactMatch": {"name": ""}})]),
        "spec.members[0].selector.exactMatch.name: Invalid value",
    ),
    "exact name not a qualified name": (
        hypernode("long-name", [node_member({"exactMatch": {"name": "n" * 64}})]),
        "spec.members[0].selector.exactMatch.name: Too long",
    ),
    "tierName over 253 characters": (
        hypernode("long-tier", [node_member({"exactMatch": {"name": "n0"}})], tierName="t" * 254),
        "spec.tierName: Too long",
    ),
    "empty regex": (
        hypernode("empty-regex", [node_member({"regexMatch": {"pattern": ""}})]),
        "spec.members[0].selector.regexMatch.pattern: Invalid value",
    ),
    "regex selects a HyperNode": (
        hypernode(
            "regex-hypernode",
            [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "s"}}}],
            tier=2,
        ),
        "a HyperNode member is named exactly: use selector.exactMatch",
    ),
    "empty labelMatch": (
        hypernode("empty-labels", [node_member({"labelMatch": {}})]),
        "an empty labelMatch would match no node",
    ),
    "In without values": (
        hypernode(
            "in-no-values",
            [node_member({"labelMatch": {"matchExpressions": [{"key": "a", "operator": "In"}]}})],
        ),
        "In and NotIn need values; Exists and DoesNotExist take none",
    ),
    "negative bandwidth": (
        hypernode(
            "neg-bw", [node_member({"exactMatch": {"name": "n0"}})], link={"bandwidthGBps": -1}
        ),
        "spec.link.bandwidthGBps: Invalid value",
    ),
    "oversubscription below 1": (
        hypernode(
            "low-oversub",
            [node_member({"exactMatch": {"name": "n0"}})],
            link={"oversubscription": 0.5},
        ),
        "spec.link.oversubscription: Invalid value",
    ),
    "Volcano: two selectors": (
        hypernode(
            "v-two",
            [
                node_member(
                    {"exactMatch": {"name": "n0"}, "labelMatch": {"matchLabels": {"a": "b"}}}
                )
            ],
            api=VOLCANO_HN,
        ),
        "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    ),
    "Volcano: empty selector": (
        hypernode("v-empty", [node_member({})], api=VOLCANO_HN),
        "Either ExactMatch or RegexMatch or LabelMatch must be specified",
    ),
    "Volcano: exact name not a qualified name": (
        hypernode("v-long", [node_member({"exactMatch": {"name": "n" * 64}})], api=VOLCANO_HN),
        "spec.members[0].selector.exactMatch.name: Too long",
    ),
    "Volcano: tierName over 253 characters": (
        hypernode(
            "v-long-tier",
            [node_member({"exactMatch": {"name": "n0"}})],
            tierName="t" * 254,
            api=VOLCANO_HN,
        ),
        "spec.tierName: Too long",
    ),
    "Volcano: negative tier": (
        hypernode("v-neg", [node_member({"exactMatch": {"name": "n0"}})], tier=-1, api=VOLCANO_HN),
        "spec.tier: Invalid value: -1: spec.tier in body should be greater than or equal to 0",
    ),
}


@pytest.mark.parametrize("case", list(REJECTED), ids=list(REJECTED))
def test_invalid_hypernode_is_rejected(crds: ControlPlane, case: str) -> None:
    obj, expected = REJECTED[case]
    error = create(crds, obj)
    assert "is invalid" in error, error
    assert expected in error, error


def test_kubectl_get_shows_tier_name_nodes_and_health(crds: ControlPlane) -> None:
    obj = hypernode(
        "columns-leaf", [node_member({"exactMatch": {"name": "n0"}})], tier=1, tierName="leaf"
    )
    assert create(crds, obj) == ""
    status = {
        "status": {
            "nodeCount": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "AllNodesReady",
                    "message": "2 of 2 nodes ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "unhealthyNodes": [],
            "health": "Healthy",
            "parent": "columns-spine",
        }
    }
    crds.kubectl(
        "patch",
        "hypernodes.topology.tierra.dev",
        "columns-leaf",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    out = crds.kubectl("get", "hypernodes.topology.tierra.dev", "columns-leaf").stdout
    header, row = out.strip().splitlines()
    assert header.split() == ["NAME", "TIER", "TIERNAME", "PARENT", "NODES", "HEALTH", "AGE"]
    assert row.split()[:6] == ["columns-leaf", "1", "leaf", "columns-spine", "2", "Healthy"]
    # The short name and category reach the same objects.
    assert "columns-leaf" in crds.kubectl("get", "thn").stdout
    assert "columns-leaf" in crds.kubectl("get", "tierra").stdout


def test_status_is_a_subresource(crds: ControlPlane) -> None:
    """Spec writers (discovery) and status writers (health) cannot overwrite each other."""
    obj = hypernode("subresource-leaf", [node_member({"exactMatch": {"name": "n0"}})])
    obj["status"] = {"nodeCount": 7}
    assert create(crds, obj) == ""
    stored = json.loads(crds.kubectl("get", "thn", "subresource-leaf", "-o", "json").stdout)
    assert "status" not in stored or "nodeCount" not in stored["status"]
