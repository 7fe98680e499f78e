"""The webhook's decisions, without a server: what it refuses, with which words, and why
those are the words ``tierra validate`` prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner
from webhook_helpers import (
    VOLCANO,
    admission_review,
    canonical,
    canonical_nodes,
    hn,
    judge_with,
    podgroup,
    workload_podgroup,
)

from tierra.api.hypernode import MANAGED_BY, TIERRA_GROUP, decode_hypernode
from tierra.api.node import decode_node
from tierra.cli import app
from tierra.kube.testing.fake import node_manifest
from tierra.kube.webhook import review
from tierra.kube.webhook.admission import Judge


def validate_errors(tmp_path: Path, docs: list[Any]) -> set[str]:
    """The errors ``tierra validate -o json`` prints for ``docs``, as the webhook words them."""
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(app, ["validate", str(snapshot), "-o", "json"])
    assert result.exit_code == 1
    return {
        f"{p['object']}: {p['field']}: {p['message']}"
        for p in json.loads(result.output)["problems"]
        if p["severity"] == "error"
    }


# -- HyperNodes ---------------------------------------------------------------------------


def test_a_valid_child_and_the_whole_tree_are_admitted() -> None:
    judge = Judge()
    for raw in canonical():  # one by one, as kubectl apply sends a file
        verdict = judge.review_hypernode(raw)
        assert verdict.allowed, verdict.message
    # The overlay made each judged against the ones before it: a second s0 parent fails.
    verdict = judge.review_hypernode(hn("s7", 2, children=("s0",)))
    assert not verdict.allowed
    assert "HyperNode/s0 already has a parent" in verdict.message


def test_cycle_is_refused_with_the_validate_message() -> None:
    judge = judge_with(canonical())
    verdict = judge.review_hypernode(hn("s0", 1, nodes=("n0",), children=("s6",)))
    assert not verdict.allowed
    assert "membership forms a cycle" in verdict.message
    assert "HyperNode/s0" in verdict.message


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param(
            hn("s7", 3, children=("s4",)),
            "HyperNode/s4 already has a parent; it is claimed by HyperNode/s6, HyperNode/s7",
            id="second-parent",
        ),
        pytest.param(
            hn("s4", 1, children=("s0", "s1")),
            "tier 1 must be above its child HyperNode/s0's tier 1",
            id="tier-inversion",
        ),
        pytest.param(
            hn("s5", 2, children=("s2", "s3"), tier_name="leaf"),
            "tierName 'leaf' means tier 1 in HyperNode/s0 but tier 2 here",
            id="tier-name-meaning-two-tiers",
        ),
        pytest.param(
            hn("s3", 1, nodes=("n6", "n0")),
            "node n0 is also a member of HyperNode/s0 in the same tree",
            id="node-in-two-leaves",
        ),
        pytest.param(
            hn("s8", 1, regex="(a+"),
            "spec.members[0].selector.regexMatch.pattern",
            id="bad-regex",
        ),
    ],
)
def test_refusals_name_object_field_and_rule(raw: dict[str, Any], want: str) -> None:
    verdict = judge_with(canonical()).review_hypernode(raw)
    assert not verdict.allowed
    assert want in verdict.message


def test_refusal_text_is_what_validate_prints(tmp_path: Path) -> None:
    bad = hn("s7", 3, children=("s4",))
    verdict = judge_with(canonical()).review_hypernode(bad)
    printed = validate_errors(tmp_path, [*canonical(), bad])
    assert verdict.problems and {str(p) for p in verdict.problems} <= printed


def test_a_broken_forest_elsewhere_does_not_block_unrelated_writes() -> None:
    objs = [*canonical(), hn("x", 2, children=("y",)), hn("y", 3, children=("x",))]
    judge = judge_with(objs)
    assert judge.review_hypernode(hn("s9", 1, nodes=("n9",))).allowed
    # ... and a write repairing part of the cycle is allowed too.
    assert judge.review_hypernode(hn("x", 2, nodes=("n10",))).allowed


def test_groups_are_separate_forests() -> None:
    judge = judge_with(canonical(VOLCANO))
    # s4 has a parent in Volcano's forest only; a tierra HyperNode claiming it is fine.
    assert judge.review_hypernode(hn("s7", 3, children=("s4",))).allowed
    verdict = judge.review_hypernode(hn("s7", 3, children=("s4",), api=VOLCANO))
    assert not verdict.allowed


def owned(raw: dict[str, Any], owner: str = "labels") -> dict[str, Any]:
    return {**raw, "metadata": {**raw["metadata"], "labels": {MANAGED_BY: owner}}}


def test_a_name_the_other_group_holds_is_admitted_with_a_warning_unless_a_mirror() -> None:
    judge = judge_with(canonical(VOLCANO))
    verdict = judge.review_hypernode(hn("s4", 2, nodes=("n0",)))
    assert verdict.allowed
    (warning,) = verdict.warnings
    assert "topology.volcano.sh also holds a HyperNode named 's4'" in warning
    assert "topology.tierra.dev/s4 and topology.volcano.sh/s4" in warning
    # the controller's copy (the same managed-by label on both) is one HyperNode: no warning
    judge = judge_with([owned(r) for r in canonical(VOLCANO)])
    assert not judge.review_hypernode(owned(hn("s0", 1, nodes=("n0", "n1")))).warnings
    assert judge.review_hypernode(owned(hn("s0", 1, nodes=("n0", "n1")), "slurm")).warnings


def test_a_podgroup_sees_both_groups_as_two_name_spaces() -> None:
    """Volcano's tree has tier name spine, tierra's (a different tree, same names) pod:
    both are the forest a PodGroup's tier name resolves in; with every HyperNode a mirror,
    tierra's copy alone (its tier names) is the topology."""
    theirs = canonical(VOLCANO)
    ours = [
        hn("s0", 1, nodes=("n0",), tier_name="rack"),
        hn("s4", 2, children=("s0",), tier_name="pod"),
    ]
    judge = judge_with([*theirs, *ours], canonical_nodes())
    for name in ("spine", "pod"):
        assert judge.review_podgroup(podgroup({"mode": "hard", "highestTierName": name})).allowed
    mirrored = [owned(r) for r in canonical(VOLCANO)] + [owned(r) for r in canonical()]
    judge = judge_with(mirrored, canonical_nodes())
    assert judge.review_podgroup(podgroup({"mode": "hard", "highestTierName": "spine"})).allowed
    assert len(judge._cache.index.trees) == 1
    assert {h.group for h in judge._cache.index.hypernodes} == {TIERRA_GROUP}


def test_dry_run_is_not_remembered() -> None:
    judge = judge_with([hn("b", 1, nodes=("n1",))])
    assert judge.review_hypernode(hn("a", 2, children=("b",)), dry_run=True).allowed
    assert judge.review_hypernode(hn("c", 2, children=("b",))).allowed
    assert not judge.review_hypernode(hn("d", 2, children=("b",))).allowed


def test_the_overlay_expires_and_yields_to_the_informer() -> None:
    now = [0.0]
    judge = judge_with([hn("b", 1, nodes=("n1",))], overlay_seconds=10, clock=lambda: now[0])
    assert judge.review_hypernode(hn("a", 2, children=("b",))).allowed
    assert not judge.review_hypernode(hn("c", 2, children=("b",))).allowed
    now[0] = 11.0  # the create never arrived (refused further down the chain): forget it
    assert judge.review_hypernode(hn("c", 2, children=("b",))).allowed
    judge.remove(TIERRA_GROUP, "c")
    judge.upsert(decode_hypernode(hn("a", 2, nodes=("n2",)), None, []))
    assert judge.review_hypernode(hn("d", 2, children=("b",))).allowed


def test_missing_child_is_a_warning_not_a_refusal() -> None:
    verdict = Judge().review_hypernode(hn("top", 2, children=("later",)))
    assert verdict.allowed
    assert any("HyperNode/later does not exist (yet)" in w for w in verdict.warnings)


# -- PodGroups ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nt", "allowed", "want"),
    [
        pytest.param(None, True, "", id="no-topology"),
        pytest.param({"mode": "hard", "highestTierName": "spine"}, True, "", id="known-name"),
        pytest.param({"mode": "soft"}, True, "", id="soft"),
        pytest.param({"mode": "hard", "highestTierAllowed": 1}, True, "", id="tier-1"),
        pytest.param(
            {"mode": "hard", "highestTierName": "rack"},
            False,
            "networkTopology.highestTierName 'rack' names no tier (known tier names: core, "
            "leaf, spine)",
            id="unknown-name",
        ),
        pytest.param(
            {"mode": "hard", "highestTierAllowed": 0},
            False,
            "no usable HyperNode has tier 0 or lower",
            id="below-every-domain",
        ),
        pytest.param(
            {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "leaf"},
            False,
            "must not specify 'highestTierAllowed' and 'highestTierName' together",
            id="both-limits",
        ),
    ],
)
def test_podgroup_topology_must_be_honourable(
    nt: dict[str, Any] | None, allowed: bool, want: str
) -> None:
    verdict = judge_with(canonical()).review_podgroup(podgroup(nt))
    assert verdict.allowed is allowed, verdict.message
    assert want in verdict.message
    if not allowed:
        assert "PodGroup/ml/train: spec" in verdict.message


def test_podgroup_subgroup_policy_is_checked_with_its_path() -> None:
    raw = podgroup(
        None,
        subGroupPolicy=[
            {
                "name": "workers",
                "matchLabelKeys": ["rank"],
                "networkTopology": {"mode": "hard", "highestTierName": "nvl"},
            }
        ],
    )
    verdict = judge_with(canonical()).review_podgroup(raw)
    assert not verdict.allowed
    assert "PodGroup/ml/train: spec.subGroupPolicy[0]: networkTopology.highestTierName" in (
        verdict.message
    )


def test_podgroup_validate_prints_the_same_problem(tmp_path: Path) -> None:
    raw = podgroup({"mode": "hard", "highestTierName": "rack"})
    verdict = judge_with(canonical()).review_podgroup(raw)
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(yaml.safe_dump_all([*canonical(), raw]))
    result = CliRunner().invoke(app, ["validate", str(snapshot)])
    assert result.exit_code == 1
    assert str(verdict.problems[0]) in result.output.replace("\n", " ").replace("  ", " ")


# -- upstream PodGroups (scheduling.k8s.io/v1alpha2) and gangs that never fit ------------

WORKLOAD = "scheduling.k8s.io"


@pytest.mark.parametrize(
    ("key", "allowed", "want"),
    [
        pytest.param(None, True, "", id="no-constraint"),
        pytest.param("example.com/rack", True, "", id="a-node-label"),
        pytest.param("leaf", True, "", id="discovered-tier-name"),
        pytest.param(
            "example.com/row",
            False,
            "PodGroup/ml/train: spec: spec.schedulingConstraints.topology[0].key "
            "'example.com/row' gives no domain: no node carries the label",
            id="nothing-carries-the-key",
        ),
    ],
)
def test_upstream_podgroup_topology_key_must_be_honourable(
    key: str | None, allowed: bool, want: str
) -> None:
    judge = judge_with(canonical(), canonical_nodes())
    verdict = judge.review_podgroup(workload_podgroup("train", 4, key), group=WORKLOAD)
    assert verdict.allowed is allowed, verdict.message
    assert want in verdict.message
    assert not verdict.warnings  # four pods fit a rack of two 110-pod nodes


def test_a_gang_that_can_never_fit_is_admitted_with_validates_warning(tmp_path: Path) -> None:
    """Too big for any domain its limit allows, even empty: told at once, as ``validate``
    tells it, but admitted (nodes can be added; a refused PodGroup would stop its job)."""
    nodes = canonical_nodes()
    judge = judge_with(canonical(), nodes)
    big = workload_podgroup("big", 300, "example.com/rack")  # a rack holds 2 x 110 pods
    verdict = judge.review_podgroup(big, group=WORKLOAD)
    assert verdict.allowed
    (warning,) = verdict.warnings
    # in the upstream PodGroup's own words: its key, its minCount, a key that would do
    assert "can never fit within topology key example.com/rack" in warning
    assert "holds 220); to fit, allow tier 2 (key: spine; s4 could hold it)" in warning
    assert warning.endswith("or lower schedulingPolicy.gang.minCount to 220")
    gpus = podgroup({"mode": "hard", "highestTierName": "leaf"})
    gpus["spec"]["minResources"] = {"nvidia.com/gpu": "24"}  # a leaf has 2 x 8
    volcano = judge.review_podgroup(gpus)
    assert volcano.allowed and "short of nvidia.com/gpu (16 of 24)" in volcano.warnings[0]
    # validate prints the same words for the same objects.
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(yaml.safe_dump_all([*canonical(), *nodes, big, gpus]))
    result = CliRunner().invoke(app, ["validate", str(snapshot), "-o", "json"])
    printed = {
        f"{p['object']}: {p['message']}"
        for p in json.loads(result.output)["problems"]
        if p["severity"] == "warning"
    }
    assert {warning, volcano.warnings[0]} <= printed


def test_upstream_refusal_text_is_what_validate_prints(tmp_path: Path) -> None:
    bad = workload_podgroup("train", 2, "example.com/row")
    nodes = canonical_nodes()
    verdict = judge_with(canonical(), nodes).review_podgroup(bad, group=WORKLOAD)
    printed = validate_errors(tmp_path, [*canonical(), *nodes, bad])
    assert verdict.problems and {str(p) for p in verdict.problems} <= printed


def test_a_malformed_upstream_podgroup_is_refused_with_its_field() -> None:
    raw = workload_podgroup("train", 2, "not a label key!")
    verdict = judge_with(canonical(), canonical_nodes()).review_podgroup(raw, group=WORKLOAD)
    assert not verdict.allowed
    assert "spec.schedulingConstraints.topology[0].key" in verdict.message


def test_nodes_relabelled_change_the_verdict() -> None:
    judge = judge_with(canonical(), canonical_nodes())
    raw = workload_podgroup("train", 2, "example.com/zone")
    assert not judge.review_podgroup(raw, group=WORKLOAD).allowed
    judge.upsert_node(decode_node(node_manifest("n0", labels={"example.com/zone": "z1"}), None, []))
    assert judge.review_podgroup(raw, group=WORKLOAD).allowed


# -- the wire -----------------------------------------------------------------------------


def test_review_round_trip_refusal_carries_uid_and_message() -> None:
    judge = judge_with(canonical())
    req = review.parse(admission_review(hn("s0", 1, children=("s6",))))
    out = review.response(req.uid, review.decide(judge, req))
    assert out["response"]["uid"] == "u-1"
    assert out["response"]["allowed"] is False
    assert "membership forms a cycle" in out["response"]["status"]["message"]


def test_review_allows_deletes_and_unknown_kinds() -> None:
    judge = judge_with(canonical())
    req = review.parse(admission_review(hn("s0", 1, children=("s6",)), operation="DELETE"))
    assert review.decide(judge, req).allowed
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    verdict = review.decide(judge, review.parse(admission_review(other)))
    assert verdict.allowed and verdict.warnings


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"kind": "AdmissionReview", "apiVersion": "v1"}', b'{"kind": "x"}'],
)
def test_review_rejects_bodies_that_are_not_reviews(body: bytes) -> None:
    with pytest.raises(review.ReviewError):
        review.parse(body)
