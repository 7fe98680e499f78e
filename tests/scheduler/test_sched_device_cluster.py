"""A cluster's DRA state for one pod: claims by name or template, allocated claims pinning
the pod, shared claims allocated once, devices in use (admin access aside, assumed too)."""

from __future__ import annotations

from dataclasses import replace

from tests.scheduler.dra_builders import (
    GPU,
    GPU_CLASS_SELECTOR,
    claim,
    device_class,
    exactly,
    gpu,
    slice_,
)

from tierra.api.labels import Operator, Requirement
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import NodeSelectorTerm, Pod, PodClaim
from tierra.api.resource import Allocation, ConsumerRef, DeviceResult
from tierra.scheduler.devices.cluster import DeviceCluster
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal


def node(name: str) -> Node:
    return Node(meta=ObjectMeta(name=name))


def pod(*claims: PodClaim, name: str = "p") -> Pod:
    return Pod(
        meta=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}"), resource_claims=claims
    )


def cluster(*claims: object) -> DeviceCluster:
    slices = [
        slice_("a", GPU, [gpu("gpu-0", "x"), gpu("gpu-1", "y")], node="a"),
        slice_("b", GPU, [gpu("gpu-0", "x")], node="b"),
    ]
    return DeviceCluster.of([device_class(GPU, GPU_CLASS_SELECTOR)], claims, [], slices)  # type: ignore[arg-type]


def on(node_name: str) -> Allocation:
    term = NodeSelectorTerm(match_fields=(Requirement("metadata.name", Operator.IN, (node_name,)),))
    result = DeviceResult(request="r", driver=GPU, pool=node_name, device="gpu-0")
    return Allocation(results=(result,), node_selector=(term,))


def test_a_template_claim_not_made_yet_makes_the_pod_wait() -> None:
    r = cluster().claims_of(pod(PodClaim("gpus", "", "tpl")))
    assert isinstance(r, DeviceRefusal)
    assert "waiting for the ResourceClaim of template tpl" in r.reason


def test_nodes_are_those_whose_devices_fit() -> None:
    dc = cluster(claim("two", exactly("r", GPU, 2)))
    names, why = dc.eligible(pod(PodClaim("g", "two")), [node("a"), node("b"), node("c")])
    assert names == ("a",) and why is None


def test_an_allocated_claim_pins_its_pods_and_is_not_allocated_again() -> None:
    allocated = replace(claim("shared", exactly("r", GPU)), allocation=on("b"))
    dc = cluster(allocated)
    names, _ = dc.eligible(pod(PodClaim("g", "shared"), name="second"), [node("a"), node("b")])
    assert names == ("b",)
    assert dc.plan(pod(PodClaim("g", "shared")), node("b")) == ()  # nothing left to allocate


def test_devices_in_use_count_assumed_allocations_and_skip_admin_access() -> None:
    dc = cluster(claim("one", exactly("r", GPU)))
    admin = replace(on("a"), results=(replace(on("a").results[0], admin_access=True),))
    dc.claims["ns/watch"] = replace(claim("watch", exactly("r", GPU)), allocation=admin)
    assert dc.in_use() == set()
    dc.assumed["ns/one"] = on("b")
    dc.changed()  # as every writer does (the feed, reserve, the binder)
    assert dc.in_use() == {(GPU, "b", "gpu-0")}
    names, _ = dc.eligible(pod(PodClaim("g", "other")), [node("a")])
    assert names == ()  # claim "other" does not exist


def test_assumed_allocations_add_to_the_devices_in_use_as_a_recount_finds_them() -> None:
    dc = cluster(claim("one", exactly("r", GPU)), claim("two", exactly("r", GPU)))
    assert dc.in_use() == set()
    twin = dc.fork()  # shares the set until either side changes it
    dc.assume([ClaimAllocation("ns/one", on("b"))])
    assert dc.in_use() == {(GPU, "b", "gpu-0")}
    assert twin.in_use() == set()  # the fork's set is its own
    plan = dc.plan(pod(PodClaim("g", "two")), node("a"))
    assert not isinstance(plan, DeviceRefusal)
    dc.assume(plan)
    kept = set(dc.in_use())
    dc.changed()  # forget the kept set: a recount from every claim agrees
    assert dc.in_use() == kept and len(kept) == 2


def test_a_view_shares_the_devices_in_use_but_the_emptied_one_counts_again() -> None:
    dc = cluster(claim("one", exactly("r", GPU)), claim("two", exactly("r", GPU)))
    dc.assume([ClaimAllocation("ns/one", on("b"))])
    two = pod(PodClaim("g", "two"))
    assert dc.eligible_unlocked(two, [node("a"), node("b"), node("c")])[0] == ("a",)
    assert dc.eligible_unlocked(two, [node("b")], empty=True)[0] == ("b",)
    assert dc.in_use() == {(GPU, "b", "gpu-0")}  # the emptied view's count stays its own


def test_devices_as_room_per_class_for_nodes_pending_pods_and_holders() -> None:
    dc = cluster(claim("two", exactly("r", GPU, 2)))
    key = "devices.tierra.dev/gpu.nvidia.com"
    assert dc.node_devices(node("a")) == {key: 2000}
    assert dc.node_devices(node("c")) == {}
    waiting = pod(PodClaim("g", "two"))
    assert dc.pod_devices(waiting) == {key: 2000}
    two = on("a")
    two = replace(two, results=(two.results[0], replace(two.results[0], device="gpu-1")))
    held = replace(
        dc.claims["ns/two"], allocation=two, reserved_for=(ConsumerRef("pods", "p", "uid-p"),)
    )
    dc.claims["ns/two"] = held
    bound = replace(waiting, node_name="a")
    assert dc.pod_devices(bound) == {key: 2000}  # what it holds
    other = replace(bound, meta=replace(bound.meta, name="q", uid="uid-q"))
    assert dc.pod_devices(other) == {}  # a shared claim counts once, on its first pod
    assert dc.pod_devices(waiting) == {}  # allocated already: nothing more to ask for
