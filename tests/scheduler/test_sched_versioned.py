"""The extensions a session's view keeps its own version of (``state/extensions.py``):
a fork changes nothing of the original and nothing of it changes the fork; ``replay``
keeps in the original what the session reserved in its fork, unless it was taken
meanwhile."""

from __future__ import annotations

from dataclasses import replace

from tests.contract.storage_docs import pvc, storage_class
from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    claim,
    device_class,
    exactly,
    gpu,
    slice_,
)

from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.pod import NodeSelectorTerm, Pod, PodClaim
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.api.resource import Allocation, DeviceResult
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.podrules.book import RulesBook
from tierra.scheduler.podrules.volumes import ClaimAction
from tierra.scheduler.state.extensions import Versioned
from tierra.scheduler.testing import pod

HOST = "kubernetes.io/hostname"


def guard(name: str, node: str) -> Pod:
    term = PodAffinityTerm(HOST, LabelSelector({"app": "web"}))
    return replace(pod(name, node_name=node), rules=PlacementRules(anti_affinity=(term,)))


def test_both_extensions_are_versioned() -> None:
    assert isinstance(RulesBook(), Versioned)
    assert isinstance(DeviceCluster(), Versioned)


def test_a_forked_book_and_its_original_go_their_own_ways() -> None:
    book = RulesBook()
    book.awake = True
    book.place(guard("g1", "n1"), "n1")
    book.upsert(storage_class("wait-sc"))
    twin = book.fork()
    book.place(guard("g2", "n2"), "n2")  # fed after the fork
    book.upsert(pvc("data"))
    twin.place(pod("mine", node_name="n3", labels={"app": "web"}), "n3")  # the session's
    assert set(book.placed.entries) == {"default/g1", "default/g2"}
    assert set(twin.placed.entries) == {"default/g1", "default/mine"}
    assert [dict(h.nodes) for h in twin.placed.anti_terms.values()] == [{"n1": 1}]
    assert [dict(h.nodes) for h in book.placed.anti_terms.values()] == [{"n1": 1, "n2": 1}]
    assert "default/data" in book.storage.claims and "default/data" not in twin.storage.claims


def test_a_book_replays_the_volumes_picked_unless_a_pv_was_taken_meanwhile() -> None:
    book = RulesBook()
    twin = book.fork()
    a, b = pod("a"), pod("b")
    twin.actions[a.key] = (ClaimAction("default/ca", "pv-1", "n1"),)
    twin.storage.reserve("pv-1", "default/ca")
    twin.actions[b.key] = (ClaimAction("default/cb", "pv-2", "n1"),)
    twin.storage.reserve("pv-2", "default/cb")
    book.storage.reserve("pv-2", "default/other")  # taken by another claim meanwhile
    book.replay(twin, [a, b])
    assert book.actions == {a.key: twin.actions[a.key]}
    assert book.storage.reserved == {"pv-1": "default/ca", "pv-2": "default/other"}


def on(node: str, device: str) -> Allocation:
    term = NodeSelectorTerm(match_fields=(Requirement("metadata.name", Operator.IN, (node,)),))
    result = DeviceResult(request="r", driver=GPU, pool=node, device=device)
    return Allocation(results=(result,), node_selector=(term,))


def devices() -> DeviceCluster:
    slices = [
        slice_(n, GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y")], node=n) for n in ("a", "b", "c")
    ]
    claims = [claim(f"c{i}", exactly("r", GPU, 1), namespace="default") for i in range(4)]
    return DeviceCluster.of([device_class(GPU, GPU_CLASS_SELECTOR)], claims, [], slices)


def claimant(i: int) -> Pod:
    return replace(pod(f"p{i}"), resource_claims=(PodClaim("g", f"c{i}"),))


def test_a_forked_device_state_and_its_original_go_their_own_ways() -> None:
    live = devices()
    twin = live.fork()
    del live.slices["b"]  # fed after the fork
    live.changed(devices=True)
    twin.assumed["default/c0"] = on("a", "gpu-0")  # the session's reservation
    assert "b" in twin.slices and "default/c0" not in live.assumed


def test_device_reservations_replay_unless_allocated_gone_or_taken_meanwhile() -> None:
    live = devices()
    twin = live.fork()
    reserved = [("a", "gpu-0"), ("a", "gpu-1"), ("b", "gpu-0"), ("b", "gpu-1")]
    for i, (node, dev) in enumerate(reserved):
        twin.assumed[f"default/c{i}"] = on(node, dev)
    other = claim("other", exactly("r", GPU, 1), namespace="default")
    live.claims[other.key] = replace(other, allocation=on("a", "gpu-1"))  # took a/gpu-1
    live.claims["default/c2"] = replace(live.claims["default/c2"], allocation=on("c", "gpu-0"))
    live.slices["b"] = slice_("b", GPU, [gpu("gpu-0", "x")], node="b")  # b's gpu-1 is gone
    live.changed(devices=True)
    live.replay(twin, [claimant(i) for i in range(4)])
    # c0 kept; c1's device taken by another claim; c2 allocated by the API meanwhile
    # (its allocation stands); c3's device no longer published
    assert set(live.assumed) == {"default/c0"}
    assert live.allocation_of("default/c2") == on("c", "gpu-0")
