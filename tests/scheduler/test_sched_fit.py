"""Node fit: resources (init containers, extended), selectors, affinity, taints, health."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.scheduler.helpers import placed, reasons, run

from tierra.api.labels import Operator, Requirement
from tierra.api.node import Taint, TaintEffect
from tierra.api.pod import NodeSelectorTerm, Toleration
from tierra.api.snapshot import load_snapshot
from tierra.scheduler import schedule
from tierra.scheduler.testing import node, pod


def test_every_requested_resource_must_fit() -> None:
    nodes = [node("a", cpu=4, memory="8Gi", gpu=0), node("b", cpu=16, memory="64Gi", gpu=0)]
    result = run(nodes, pods=[pod("p", cpu=8, memory="16Gi")])
    assert placed(result) == {"default/p": "b"}
    result = run(nodes, pods=[pod("p", cpu=2, memory="32Gi")])
    assert placed(result) == {"default/p": "b"}
    result = run(nodes, pods=[pod("p", cpu=32)])
    assert "short of cpu" in reasons(result)["default/p"]


def test_extended_resources_count_and_unknown_ones_are_explained() -> None:
    nodes = [
        node("a", gpu=0),
        replace(
            node("b", gpu=0), allocatable={**node("b", gpu=0).allocatable, "example.com/fpga": 2000}
        ),
    ]
    fpga = pod("p", extra={"example.com/fpga": 2000})
    assert placed(run(nodes, pods=[fpga])) == {"default/p": "b"}
    weird = pod("q", extra={"example.com/teleporter": 1000})
    reason = reasons(run(nodes, pods=[weird]))["default/q"]
    assert "example.com/teleporter, which no node offers" in reason


def test_init_containers_count_as_kubernetes_counts_them(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        """
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: big}
status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  schedulerName: tierra
  initContainers: [{name: warm, image: x, resources: {requests: {cpu: "12"}}}]
  containers: [{name: main, image: x, resources: {requests: {cpu: "2"}}}]
"""
    )
    snap = load_snapshot([f])
    assert placed(schedule(snap)) == {"default/p": "big"}  # 12 cpu at init, not 2


def test_cordoned_and_not_ready_nodes_are_excluded_and_counted_in_the_reason() -> None:
    nodes = [node("a", cordoned=True), node("b", ready=False), node("c", gpu=0)]
    result = run(nodes, pods=[pod("p", gpu=1)])
    reason = reasons(result)["default/p"]
    assert "1 cordoned" in reason and "1 NotReady" in reason


@pytest.mark.parametrize(
    ("taint", "tolerations", "want"),
    [
        pytest.param(TaintEffect.NO_SCHEDULE, (), "b", id="noschedule-avoided"),
        pytest.param(TaintEffect.NO_EXECUTE, (), "b", id="noexecute-avoided"),
        pytest.param(TaintEffect.PREFER_NO_SCHEDULE, (), "a", id="prefer-is-not-a-filter"),
        pytest.param(
            TaintEffect.NO_SCHEDULE, (Toleration("dedicated", "Exists"),), "a", id="tolerated"
        ),
        pytest.param(
            TaintEffect.NO_SCHEDULE,
            (Toleration("dedicated", "Equal", "other"),),
            "b",
            id="wrong-value-not-tolerated",
        ),
        pytest.param(
            TaintEffect.NO_EXECUTE,
            (Toleration("dedicated", "Exists", "", TaintEffect.NO_SCHEDULE),),
            "b",
            id="wrong-effect-not-tolerated",
        ),
    ],
)
def test_taints_and_tolerations(
    taint: TaintEffect, tolerations: tuple[Toleration, ...], want: str
) -> None:
    # "a" is fuller, so binpack prefers it unless its taint forbids
    nodes = [node("a", taints=[Taint("dedicated", taint, "ml")]), node("b")]
    running = pod("r", node_name="a", gpu=4)
    result = run(nodes, pods=[running, pod("p", gpu=1, tolerations=tolerations)])
    assert placed(result) == {"default/p": want}


def test_untolerated_taints_are_named_in_the_reason() -> None:
    nodes = [node("a", taints=[Taint("dedicated", TaintEffect.NO_SCHEDULE, "ml")])]
    reason = reasons(run(nodes, pods=[pod("p")]))["default/p"]
    assert "untolerated taint dedicated=ml:NoSchedule" in reason


def test_node_selector() -> None:
    nodes = [node("a", labels={"gpu": "a100"}), node("b", labels={"gpu": "h100"})]
    result = run(nodes, pods=[pod("p", node_selector={"gpu": "h100"})])
    assert placed(result) == {"default/p": "b"}
    result = run(nodes, pods=[pod("p", node_selector={"gpu": "b200"})])
    assert "2 not matching nodeSelector" in reasons(result)["default/p"]


@pytest.mark.parametrize(
    ("req", "want"),
    [
        pytest.param(Requirement("zone", Operator.IN, ("east",)), {"a"}, id="In"),
        pytest.param(Requirement("zone", Operator.NOT_IN, ("east",)), {"b", "c"}, id="NotIn"),
        pytest.param(Requirement("zone", Operator.EXISTS), {"a", "b"}, id="Exists"),
        pytest.param(Requirement("zone", Operator.DOES_NOT_EXIST), {"c"}, id="DoesNotExist"),
        pytest.param(Requirement("gen", Operator.GT, ("3",)), {"b"}, id="Gt"),
        pytest.param(Requirement("gen", Operator.LT, ("4",)), {"a"}, id="Lt"),
    ],
)
def test_required_node_affinity(req: Requirement, want: set[str]) -> None:
    nodes = [
        node("a", labels={"zone": "east", "gen": "3"}),
        node("b", labels={"zone": "west", "gen": "4"}),
        node("c", labels={}),
    ]
    # one pod per node at most (8 GPUs each), three pods: each lands on an allowed node
    pods = [
        replace(pod(f"p{i}", gpu=8), affinity_terms=(NodeSelectorTerm((req,)),)) for i in range(3)
    ]
    result = run(nodes, pods=pods)
    assert set(placed(result).values()) == want


def test_affinity_terms_are_ored_and_match_fields_name_the_node() -> None:
    nodes = [node("a"), node("b"), node("c")]
    terms = (
        NodeSelectorTerm((), (Requirement("metadata.name", Operator.IN, ("c",)),)),
        NodeSelectorTerm((Requirement("missing", Operator.EXISTS),)),
    )
    p = replace(pod("p"), affinity_terms=terms)
    assert placed(run(nodes, pods=[p])) == {"default/p": "c"}
