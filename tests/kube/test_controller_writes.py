"""Plan changes as request bodies: creates without status, updates naming only what
differs (and only tierra's labels), deletes guarded by resourceVersion."""

from __future__ import annotations

from dataclasses import replace

from tierra.api.hypernode import (
    TIERRA_GROUP,
    VOLCANO_GROUP,
    HyperNode,
    LinkSpec,
    decode_hypernode,
)
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.discovery import labels, reconcile
from tierra.kube.controller.writes import create_body, delete_options, update_patch


def discovered(racks: dict[str, str]) -> tuple[HyperNode, ...]:
    ns = [Node(meta=ObjectMeta(name=n, labels={"rack": r})) for n, r in sorted(racks.items())]
    return labels.discover_labels(ns, [labels.make_topology("lab", ["rack"])]).hypernodes


def stored(hn: HyperNode, group: str) -> HyperNode:
    """``hn`` as the API would return it: server fields, someone else's label."""
    raw = create_body(hn, group)
    raw["metadata"].update(resourceVersion="41", uid="u", creationTimestamp="t")
    raw["metadata"]["labels"]["team"] = "ml"
    return decode_hypernode(raw, None, [])


def test_create_body_has_no_status_or_server_fields() -> None:
    (hn,) = discovered({"n1": "r1"})
    body = create_body(hn, VOLCANO_GROUP)
    assert body["apiVersion"] == "topology.volcano.sh/v1alpha1"
    assert "status" not in body
    assert set(body["metadata"]) == {"name", "labels", "annotations"}


def test_update_patch_names_only_the_difference() -> None:
    old = discovered({"n1": "r1", "n2": "r1"})
    new = discovered({"n1": "r1", "n2": "r1", "n3": "r1"})
    have = [stored(h, TIERRA_GROUP) for h in old]
    plan = reconcile.plan(new, have, owner="labels")
    (change,) = plan.of(reconcile.Action.UPDATE)
    patch = update_patch(change, TIERRA_GROUP, "41")
    assert patch["metadata"] == {"resourceVersion": "41"}  # no label of ours changed
    assert set(patch["spec"]) == {"members"}
    assert len(patch["spec"]["members"]) == 3


def test_update_patch_volcano_link_and_removed_tier_name() -> None:
    (hn,) = discovered({"n1": "r1"})
    have = stored(replace(hn, tier_name="rack"), VOLCANO_GROUP)
    want = replace(hn, tier_name=None, link=LinkSpec(medium="nvlink"))
    plan = reconcile.plan([want], [have], owner="labels", group=VOLCANO_GROUP)
    (change,) = plan.of(reconcile.Action.UPDATE)
    patch = update_patch(change, VOLCANO_GROUP, "41")
    assert patch["spec"] == {"tierName": None}
    assert patch["metadata"]["annotations"] == {"topology.tierra.dev/link": '{"medium": "nvlink"}'}
    assert "team" not in str(patch)  # someone else's label is never in a patch


def test_delete_options_carry_the_precondition() -> None:
    assert delete_options("41")["preconditions"] == {"resourceVersion": "41"}
