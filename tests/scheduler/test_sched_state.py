"""ClusterState across sessions: decisions applied, pods removed, nodes changing."""

from __future__ import annotations

from dataclasses import replace

from tierra.scheduler import ClusterState, run_session
from tierra.scheduler.testing import canonical, gang, node, pod, snapshot, topology


def test_a_session_applies_its_bindings() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 2, network_topology=topology(tier=1), gpu=8)
    state = ClusterState.from_snapshot(snapshot(nodes, hns, pods, [pg]))
    first = run_session(state)
    assert len(first.bindings) == 2
    assert all(state.pods[b.pod].node_name == b.node for b in first.bindings)
    assert run_session(state).bindings == ()  # nothing pending any more
    used = state.capacity.dom_used[state.index.ix["s0"]]
    assert used[state.capacity.axis.index["nvidia.com/gpu"]] == 16000


def test_removing_a_pod_frees_its_room() -> None:
    nodes = [node("a")]
    state = ClusterState.from_snapshot(snapshot(nodes, pods=[pod("r", node_name="a", gpu=8)]))
    state.add_pods([pod("p", gpu=8)])
    assert run_session(state).bindings == ()
    state.remove_pod("default/r")
    assert [b.pod for b in run_session(state).bindings] == ["default/p"]


def test_a_node_turning_not_ready_is_avoided_without_a_rebuild() -> None:
    nodes, hns = canonical()
    state = ClusterState.from_snapshot(snapshot(nodes, hns))
    generation = state.generation
    state.update_node(node("node-0", ready=False))
    assert state.generation == generation
    state.add_pods([pod("p", gpu=8)])
    result = run_session(state)
    assert result.bindings[0].node != "node-0"
    assert state.health.degraded(state.index.ix["s0"])


def test_a_new_node_rebuilds_the_index_and_keeps_pods_in_place() -> None:
    nodes = [node("a")]
    state = ClusterState.from_snapshot(snapshot(nodes, pods=[pod("r", node_name="a", gpu=8)]))
    state.update_node(node("b"))
    assert state.index.node_names == ("a", "b")
    state.add_pods([pod("p", gpu=8)])
    assert [b.node for b in run_session(state).bindings] == ["b"]


def test_replacing_a_pod_does_not_double_count() -> None:
    state = ClusterState.from_snapshot(snapshot([node("a")], pods=[pod("r", node_name="a", gpu=4)]))
    state.add_pods([replace(pod("r", node_name="a", gpu=4))])
    gpu = state.capacity.axis.index["nvidia.com/gpu"]
    assert state.capacity.node_used[0, gpu] == 4000
