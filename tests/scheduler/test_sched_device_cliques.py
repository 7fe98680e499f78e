"""A gang kept inside one NVLink clique: of two racks that can each hold it, the one
whose nodes share a clique is chosen; where only a rack spanning cliques can, the gang
still goes there (a preference, not a rule); a clique reported by the GPUs' DRA
attributes counts as the node label does."""

from __future__ import annotations

from dataclasses import replace

from tierra.scheduler import SchedulerConfig, schedule
from tierra.scheduler.constraints.registry import DEFAULT
from tierra.scheduler.devices.cliques import CLIQUE_LABEL, NvlinkCliques, node_cliques
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.testing import gang, hypernode, node, snapshot, topology


def _cluster(mixed: str = "r0") -> tuple[list, list]:  # type: ignore[type-arg]
    nodes = []
    for i in range(8):
        rack = "r0" if i < 4 else "r1"
        clique = f"uuid-{rack}.{i % 2 if rack == mixed else 0}"
        nodes.append(node(f"n{i}", gpu=8, labels={CLIQUE_LABEL: clique}))
    hns = [
        hypernode("r0", 1, nodes=[f"n{i}" for i in range(4)]),
        hypernode("r1", 1, nodes=[f"n{i}" for i in range(4, 8)]),
        hypernode("s", 2, children=["r0", "r1"]),
    ]
    return nodes, hns


def _racks(result: object, nodes_of: dict[str, str]) -> set[str]:
    return {nodes_of[b.node] for b in result.bindings}  # type: ignore[attr-defined]


RACK = {f"n{i}": ("r0" if i < 4 else "r1") for i in range(8)}
WITHOUT = replace(
    SchedulerConfig(), constraints=tuple(c for c in DEFAULT if not isinstance(c, NvlinkCliques))
)


def test_the_rack_within_one_clique_is_chosen() -> None:
    for mixed, want in (("r0", {"r1"}), ("r1", {"r0"})):
        nodes, hns = _cluster(mixed)
        pg, pods = gang("job", 8, network_topology=topology(tier=1), gpu=4)
        result = schedule(snapshot(nodes, hns, pods, [pg]))
        assert len(result.bindings) == 8
        assert _racks(result, RACK) == want, mixed
    # without the constraint the first rack is taken, whatever its cliques
    nodes, hns = _cluster("r0")
    pg, pods = gang("job", 8, network_topology=topology(tier=1), gpu=4)
    assert _racks(schedule(snapshot(nodes, hns, pods, [pg]), WITHOUT), RACK) == {"r0"}


def test_a_gang_only_a_mixed_rack_holds_still_goes_there() -> None:
    nodes, hns = _cluster("r0")
    nodes = [n for n in nodes if n.name != "n7"] + [node("n7", gpu=0, labels=dict(nodes[7].labels))]
    pg, pods = gang("job", 8, network_topology=topology(tier=1), gpu=4)
    result = schedule(snapshot(nodes, hns, pods, [pg]))
    assert len(result.bindings) == 8 and _racks(result, RACK) == {"r0"}


def test_nodes_without_a_clique_are_neutral() -> None:
    nodes, hns = _cluster("r0")
    store = ClusterStore.from_snapshot(snapshot(nodes, hns))
    cliques = node_cliques(store)
    assert len(set(cliques.tolist())) == 3 and (cliques >= 0).all()
    bare = [replace(n, meta=replace(n.meta, labels={})) for n in nodes]
    assert (node_cliques(ClusterStore.from_snapshot(snapshot(bare, hns))) == -1).all()
