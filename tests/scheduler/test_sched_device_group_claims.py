"""Claims a PodGroup shares (DRAWorkloadResourceClaims): allocated once for the gang,
reserved for the PodGroup, and the gang placed where their allocation lets every pod
run -- the node of a node-local device, the nodes a slice's nodeSelector names."""

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

from tierra.api.meta import ObjectMeta
from tierra.api.pod import PodClaim
from tierra.api.podgroup import PodGroup
from tierra.api.resource import ConsumerRef
from tierra.scheduler import ClusterStore, run_session
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.group_claims import (
    consumer,
    consumer_dict,
    group_claim,
    reserved_for_pod,
)
from tierra.scheduler.devices.placement import device_snapshot, session_allocations
from tierra.scheduler.testing import hypernode, node, pod, snapshot

FABRIC = "fabric.example.com"


def _upstream_gang(name: str, size: int, shared: str, own: bool = False, cpu: int = 1):
    group = PodGroup(
        meta=ObjectMeta(name=name, namespace="default", uid=f"uid-{name}"),
        min_member=size,
        resource_claims=(PodClaim("fabric", shared),),
    )
    pods = []
    for i in range(size):
        claims = [PodClaim("fabric", shared)]
        if own:
            claims.append(PodClaim("gpu", f"{name}-{i}-gpu"))
        p = pod(f"{name}-{i}", cpu=cpu)
        pods.append(replace(p, scheduling_group=name, resource_claims=tuple(claims)))
    return group, pods


def _classes():
    return (
        device_class(GPU, GPU_CLASS_SELECTOR),
        device_class(FABRIC, f"device.driver == '{FABRIC}'"),
    )


def _fabric(name: str, **where: object):
    return slice_(name, FABRIC, [{"name": "channel-0"}], pool=name, **where)


def _run(snap):
    seen, devices, _ = device_snapshot(snap, ("tierra",))
    store = ClusterStore.from_snapshot(seen)
    store.extensions[EXTENSION] = devices
    result = run_session(store)
    return result, devices, session_allocations(result, devices, {p.key: p for p in snap.pods})


def test_upstream_bind_to_and_is_reserved_for_pod() -> None:
    group, (p0, _) = _upstream_gang("job", 2, "shared")
    mine = PodClaim("own", "own-claim")
    assert group_claim(p0, group, p0.resource_claims[0])
    assert not group_claim(p0, group, mine)
    assert not group_claim(p0, group, PodClaim("fabric", "other"))  # another claim
    ref = consumer(p0, group, p0.resource_claims[0])
    assert consumer_dict(ref) == {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": "job",
        "uid": "uid-job",
    }
    assert consumer(p0, group, mine) == ConsumerRef("pods", p0.name, p0.meta.uid)
    c = replace(claim("shared", exactly("r", FABRIC), namespace="default"), reserved_for=(ref,))
    assert reserved_for_pod(p0, c)
    stranger = replace(p0, scheduling_group="other")
    assert not reserved_for_pod(stranger, c)


def test_a_node_local_group_claim_keeps_the_gang_on_one_node_that_holds_it() -> None:
    # a1 fits 2 of the 4 pods, a2 all 4: best fit would start on a1; the claim's reach
    # (one node) must hold the whole gang, so a2.
    group, pods = _upstream_gang("job", 4, "shared", cpu=4)
    nodes = [node("a1", cpu=8, gpu=0), node("a2", cpu=16, gpu=0)]
    snap = snapshot(nodes, [hypernode("rack", 1, nodes=["a1", "a2"])], pods, [group])
    snap = replace(
        snap,
        device_classes=_classes(),
        resource_claims=(claim("shared", exactly("r", FABRIC), namespace="default"),),
        resource_slices=(_fabric("f-a1", node="a1"), _fabric("f-a2", node="a2")),
    )
    result, devices, placed = _run(snap)
    assert {b.node for b in result.bindings} == {"a2"}, result.unschedulable
    assert len(result.bindings) == 4
    (allocation,) = {a.allocation for allocs in placed.values() for a in allocs}
    assert [r.pool for r in allocation.results] == ["f-a2"]  # allocated once
    assert devices.pod_devices(pods[0]) == {}  # the group's claim is nobody's room


def test_a_rack_fabric_claim_keeps_the_gang_inside_the_rack_its_selector_names() -> None:
    # One fabric channel per rack, published for the rack's nodes (a nodeSelector);
    # each pod also takes one GPU of its own, one per node: the gang of 2 spans a rack.
    group, pods = _upstream_gang("job", 2, "shared", own=True)
    nodes = [node(n, gpu=0, labels={"rack": n[0]}) for n in ("a1", "a2", "b1", "b2")]
    racks = [hypernode("rack-a", 1, nodes=["a1", "a2"]), hypernode("rack-b", 1, nodes=["b1", "b2"])]
    top = hypernode("spine", 2, children=["rack-a", "rack-b"])

    def selecting(rack: str) -> dict[str, object]:
        expr = {"key": "rack", "operator": "In", "values": [rack]}
        return {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}

    snap = snapshot(nodes, [*racks, top], pods, [group])
    own = [claim(f"job-{i}-gpu", exactly("g", GPU), namespace="default") for i in range(2)]
    gpus = [slice_(f"g-{n}", GPU, [gpu("gpu-0", "x")], node=n) for n in ("a1", "a2", "b1")]
    snap = replace(
        snap,
        device_classes=_classes(),
        resource_claims=(claim("shared", exactly("r", FABRIC), namespace="default"), *own),
        resource_slices=(
            *gpus,
            _fabric("f-a", node=None, nodeSelector=selecting("a")),
            _fabric("f-b", node=None, nodeSelector=selecting("b")),
        ),
    )
    result, devices, _ = _run(snap)
    assert sorted(b.node for b in result.bindings) == ["a1", "a2"], result.unschedulable
    shared = devices.allocation_of("default/shared")
    assert shared is not None and [r.pool for r in shared.results] == ["f-a"]
    (term,) = shared.node_selector or ()
    assert term.match_expressions[0].values == ("a",)


def test_no_reach_holds_the_gang_and_the_reason_says_so() -> None:
    group, pods = _upstream_gang("job", 3, "shared", cpu=8)
    nodes = [node("a1", cpu=16, gpu=0), node("a2", cpu=16, gpu=0)]
    snap = snapshot(nodes, [hypernode("rack", 1, nodes=["a1", "a2"])], pods, [group])
    snap = replace(
        snap,
        device_classes=_classes(),
        resource_claims=(claim("shared", exactly("r", FABRIC), namespace="default"),),
        resource_slices=(_fabric("f-a1", node="a1"), _fabric("f-a2", node="a2")),
    )
    result, devices, _ = _run(snap)
    assert not result.bindings
    assert devices.assumed == {}
    (waiting,) = result.unschedulable
    assert (
        "3 pods must run where ResourceClaim/default/shared, their PodGroup's, is allocated: "
        "at most 2 fit in any such place"
    ) in waiting.reason, waiting.reason
