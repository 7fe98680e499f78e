"""Runs of alike lone pods placed in one flat pass decide what placing them one by one
does (``placement/lone.py``): same bindings, reasons, evictions, decisions and store.

The reference is the same session with runs switched off (``LoneRuns.take`` finds
none), so every lone pod takes the usual path: its own plan, admit, flat-path node
choice (scores refreshed after it), reserve and commit. Worlds are small on purpose:
nearly full clusters, runs broken by gangs, priorities, node selectors and queues,
pods with rules waking the pod-rules book, preemption on or off, and several policy
mixes -- the places where the run could part from one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierra.api.hypernode import HyperNode
from tierra.api.labels import LabelSelector
from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, run_session
from tierra.scheduler.config import WeightedPolicy
from tierra.scheduler.placement.lone import LoneRuns
from tierra.scheduler.result import Decision
from tierra.scheduler.scoring.binpack import Binpack
from tierra.scheduler.scoring.spread import Spread
from tierra.scheduler.testing import fat_tree, node, pod, podgroup, queue, topology

HOST = "kubernetes.io/hostname"
QUEUE = "scheduling.volcano.sh/queue-name"
CONFIGS = {
    "default": SchedulerConfig(),
    "preemption": SchedulerConfig(preemption=True),
    "spread": SchedulerConfig(policies=(WeightedPolicy(Spread(), 1.0),)),
    "binpack-cpu": SchedulerConfig(
        policies=(WeightedPolicy(Binpack(resources=(("cpu", 1.0),), fading=0.5), 2.0),)
    ),
}
World = tuple[list[Node], list[HyperNode], list[Pod], list[PodGroup], list[Queue]]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    per_leaf = draw(st.integers(1, 4))
    nodes, hns = fat_tree(draw(st.integers(2, 16)), per_leaf=per_leaf, leaves_per_spine=2)
    nodes = [
        node(
            n.name,
            cpu=draw(st.sampled_from([4, 8])),
            gpu=draw(st.sampled_from([2, 4, 8])),
            labels={HOST: n.name, "zone": draw(st.sampled_from(["a", "b"]))},
        )
        for n in nodes
    ]
    names = [n.name for n in nodes]
    pods: list[Pod] = []
    for i in range(draw(st.integers(0, 10))):  # already running, some of them low priority
        pods.append(
            pod(
                f"run{i}",
                cpu=1,
                gpu=draw(st.sampled_from([0, 1, 2, 4])),
                priority=draw(st.sampled_from([0, 1])),
                node_name=draw(st.sampled_from(names)),
                labels={"app": draw(st.sampled_from(["x", "y"]))},
            )
        )
    kinds = draw(
        st.lists(
            st.tuples(
                st.sampled_from([1, 2]),  # cpu
                st.sampled_from([0, 1, 2, 4]),  # gpu
                st.sampled_from([0, 0, 5]),  # priority
                st.sampled_from([None, None, "a"]),  # node selector zone
                st.sampled_from(["default", "default", "other"]),  # queue
            ),
            min_size=1,
            max_size=3,
        )
    )
    for i in range(draw(st.integers(1, 40))):  # lone pods, in runs of alike ones
        cpu, gpu, prio, zone, q = kinds[draw(st.integers(0, len(kinds) - 1))]
        p = pod(
            f"lone{i:03d}",
            cpu=cpu,
            gpu=gpu,
            priority=prio,
            node_selector={"zone": zone} if zone else None,
            annotations={QUEUE: q} if q != "default" else None,
            labels={"app": "x"},
        )
        if draw(st.integers(0, 19)) == 0:  # rules wake the pod-rules book
            anti = PodAffinityTerm(HOST, LabelSelector({"app": "x"}))
            p = replace(p, rules=PlacementRules(anti_affinity=(anti,)))
        pods.append(p)
    pgs: list[PodGroup] = []
    for _ in range(draw(st.integers(0, 3))):  # gangs between the runs
        size = draw(st.integers(1, 3))
        nt = draw(st.sampled_from([None, topology(tier=1)]))
        pgs.append(podgroup(f"lone{draw(st.integers(0, 40)):03d}g", size, network_topology=nt))
        name = pgs[-1].meta.name
        pods += [pod(f"{name}-{i}", group=name, cpu=1, gpu=1) for i in range(size)]
    queues = [queue("other")] if draw(st.booleans()) else []
    return nodes, hns, pods, pgs, queues


def decide(world: World, config: SchedulerConfig) -> tuple[Any, ...]:
    nodes, hns, pods, pgs, queues = world
    store = ClusterStore(nodes=nodes, hypernodes=hns)
    for q in queues:
        store.upsert_queue(q)
    for pg in pgs:
        store.upsert_podgroup(pg)
    for p in pods:
        store.upsert_pod(p)
    seen: list[Decision] = []
    first = run_session(store, config, memory=Memory(), on_decision=seen.append)
    second = run_session(store, config, memory=Memory())  # what the store kept, read again
    decisions = [(d.gang, d.code, d.bindings, d.evictions) for d in first.decisions]
    streamed = [(d.gang, d.code, d.bindings, d.evictions) for d in seen]
    kept = (
        sorted((k, p.node_name) for k, p in store.pods.items()),
        sorted(store.assumed),
        sorted(store.node_of.items()),
        store.clock,
        sorted(store.gang_changed_at.items()),
        sorted(store.shape_gpus.items()),
        list(store.priorities.items()),
        sorted((q, v.tolist()) for q, v in store.queue_used.items()),
        store.capacity.node_used.tolist(),
    )
    return first.to_dict(), decisions, streamed, second.to_dict(), kept


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.sampled_from(sorted(CONFIGS)))
def test_a_run_decides_what_one_by_one_does(world: World, config_name: str) -> None:
    config = CONFIGS[config_name]
    together = decide(world, config)
    with patch.object(LoneRuns, "take", return_value=None):
        one_by_one = decide(world, config)
    assert together == one_by_one


def test_a_run_is_taken_and_each_pod_is_its_own_decision() -> None:
    """The switch the property test turns off is on: twelve alike lone pods on three
    nodes go in one run, and still come out as twelve gangs of one, in queue order."""
    nodes = [node(f"n{i}", cpu=8, gpu=4) for i in range(3)]
    store = ClusterStore(nodes=nodes)
    for i in range(12):
        store.upsert_pod(pod(f"p{i:02d}", cpu=1, gpu=1))
    taken: list[int] = []
    real = LoneRuns.take

    def spy(self: LoneRuns, *args: Any) -> Any:
        found = real(self, *args)
        taken.append(0 if found is None else len(found[1]))
        return found

    with patch.object(LoneRuns, "take", spy):
        result = run_session(store, SchedulerConfig(), memory=Memory())
    assert taken[0] == 12
    assert [d.gang for d in result.decisions] == [f"default/p{i:02d}" for i in range(12)]
    assert all(len(d.bindings) == 1 for d in result.decisions)
    assert len({b.node for b in result.bindings}) == 3
