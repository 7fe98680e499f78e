"""A constraint written against the protocol alone, in this one module: "at most K pods of
a gang per node", registered in a test-only registry, obeyed, explained and counted.

Nothing else in the repository knows of it: it caps the per-node counts (the
protocol's ``node_caps``), says why it lowered them as data (``cap_refusal``) and puts
that in words only when explain asks (``describe``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from tierra.scheduler import Code, SchedulerConfig, schedule
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.scheduler.constraints.registry import DEFAULT
from tierra.scheduler.placement.demand import Shape
from tierra.scheduler.state.store import ClusterStore
from tierra.scheduler.testing import canonical, gang, snapshot, topology
from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class MaxPodsPerNode(Constraint):
    """At most ``k`` pods of one gang on any node (its running pods count)."""

    k: int
    name = "max-pods-per-node"

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        store, gang = cycle.store, cycle.gang
        assert gang is not None
        on = [store.node_of[p.key] for p in gang.running if p.key in store.node_of]
        mine = {p.key for p in gang.pending}
        on += [n for p, n, _ in cycle.overlay.assigned if p.key in mine]
        held = np.bincount(np.asarray(on, dtype=np.int64), minlength=len(store.index.node_names))
        return self.k - held[nodes]

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "per-node cap", capped, (("k", self.k),))

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        k = refusal.value("k")
        return f"at most {k} pods of a gang per node ({refusal.count} nodes capped)"


def config(k: int) -> SchedulerConfig:
    return replace(SchedulerConfig(), constraints=(*DEFAULT, MaxPodsPerNode(k)))


def per_node(result_bindings: list[tuple[str, str]]) -> Counter[str]:
    return Counter(node for _, node in result_bindings)


def test_without_it_the_gang_packs_onto_one_node() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 6, network_topology=topology(tier=1), gpu=1)
    result = schedule(snapshot(nodes, hns, pods, [pg]))
    assert len(result.bindings) == 6
    assert max(per_node([(b.pod, b.node) for b in result.bindings]).values()) > 2


def test_obeyed_in_a_domain_search_and_on_the_flat_path() -> None:
    nodes, hns = canonical()
    for nt in (topology(tier=2), topology(mode="soft"), None):
        pg, pods = gang("job", 6, network_topology=nt, gpu=1)
        result = schedule(snapshot(nodes, hns, pods, [pg]), config(2))
        assert len(result.bindings) == 6, (nt, result.unschedulable)
        counts = per_node([(b.pod, b.node) for b in result.bindings])
        assert max(counts.values()) <= 2, (nt, counts)
    # a tier-1 domain has two nodes, so it holds 4 of 6 at 2 a node: the gang goes to tier 2
    pg, pods = gang("job", 6, network_topology=topology(mode="soft"), gpu=1)
    result = schedule(snapshot(nodes, hns, pods, [pg]), config(2))
    assert {b.hypernode for b in result.bindings} == {"s4"}


def test_refused_explained_and_counted() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 5, network_topology=topology(tier=1), gpu=1)
    result = schedule(snapshot(nodes, hns, pods, [pg]), config(2))
    assert not result.bindings
    (waiting,) = result.unschedulable
    assert waiting.status.code is Code.UNSCHEDULABLE
    # the reason is the session's usual sentence plus the constraint's own words and count
    assert "holds 4" in waiting.reason
    assert "at most 2 pods of a gang per node (8 nodes capped)" in waiting.reason


def test_the_default_registry_does_not_hold_it() -> None:
    assert not any(isinstance(c, MaxPodsPerNode) for c in SchedulerConfig().constraints)
    assert config(2) != SchedulerConfig()  # a Memory made under one forgets under the other
