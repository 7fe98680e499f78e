"""Queue capability on random trees, capabilities and gangs, checked by independent code.

The checker below reads only the API objects (queues' ``parent`` and ``capability``,
pods' requests, PodGroups' queues) and the session's decisions; it shares nothing with
the scheduler's queue book. After a session, for every queue and every resource its
capability names: if any pod bound in the session asks for that resource and belongs to
the queue or a queue below it, the queue's subtree holds at most its capability
(Volcano: ``allocated + request <= capability`` for every task). Also: gangs start with
at least their minimum; no pod is bound into a queue with children.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.queue import Queue
from tierra.scheduler import SessionResult, schedule
from tierra.scheduler.result import Binding
from tierra.scheduler.testing import node, pod, podgroup, queue, snapshot

GPU = "nvidia.com/gpu"
CPU = "cpu"


@dataclass
class World:
    nodes: list[Node]
    queues: list[Queue]
    pods: list[Pod]
    podgroups: list[PodGroup]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    nodes = [node(f"n{i}", cpu=16, gpu=8) for i in range(draw(st.integers(1, 4)))]
    queues: list[Queue] = []
    names: list[str] = []
    for i in range(draw(st.integers(1, 5))):
        name = f"q{i}"
        parent = draw(st.sampled_from(["", *names]))  # earlier queues only: no cycles
        cap: dict[str, int] = {}
        if draw(st.booleans()):
            cap[GPU] = 1000 * draw(st.integers(0, 20))
        if draw(st.integers(0, 3)) == 0:
            cap[CPU] = 1000 * draw(st.integers(0, 24))
        queues.append(queue(name, capability=cap, parent=parent, weight=draw(st.integers(1, 3))))
        names.append(name)
    pods: list[Pod] = []
    pgs: list[PodGroup] = []
    free = {n.name: 8 for n in nodes}
    for g in range(draw(st.integers(1, 6))):
        name = f"g{g}"
        size = draw(st.integers(1, 5))
        minimum = draw(st.integers(1, size))
        gpu = draw(st.integers(0, 4))
        cpu = draw(st.integers(1, 4))
        q = draw(st.sampled_from(["default", *names]))
        pgs.append(podgroup(name, minimum, queue=q))
        running = draw(st.integers(0, size)) if draw(st.booleans()) else 0
        for i in range(size):
            where = ""
            if i < running:  # a running member, where it fits (so the snapshot is real)
                fits = [n for n, f in free.items() if f >= gpu]
                if fits:
                    where = fits[0]
                    free[where] -= gpu
            pods.append(pod(f"{name}-{i}", group=name, gpu=gpu, cpu=cpu, node_name=where))
    return World(nodes, queues, pods, pgs)


def _ancestors(queues: dict[str, Queue], name: str) -> list[str]:
    """``name`` and the queues above it, by ``spec.parent`` (root implied)."""
    out = [name]
    at = queues[name].parent if name in queues else ""
    while at and at in queues and at not in out:
        out.append(at)
        at = queues[at].parent
    return out


def check(world: World, result: SessionResult) -> None:
    queues = {q.name: q for q in world.queues}
    pg_queue = {pg.key: pg.queue for pg in world.podgroups}
    by_key = {p.key: p for p in world.pods}
    evicted = {e.pod for e in result.evictions}
    new = {b.pod for b in result.bindings}
    bound = [p for p in world.pods if p.bound and p.key not in evicted]
    bound += [by_key[k] for k in new]

    def queue_of(p: Pod) -> str:
        return pg_queue.get(f"{p.namespace}/{p.group_name}", "default")

    usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for p in bound:
        for q in _ancestors(queues, queue_of(p)):
            for r, v in p.requests.items():
                usage[q][r] += v
    asked: dict[str, set[str]] = defaultdict(set)  # queue -> resources new pods asked of it
    for k in new:
        p = by_key[k]
        for q in _ancestors(queues, queue_of(p)):
            asked[q].update(r for r, v in p.requests.items() if v > 0)
    for name, q in queues.items():
        for r, cap in q.capability.items():
            if r in asked[name]:
                assert usage[name][r] <= cap, (name, r, usage[name][r], cap)
    parents = {q.parent for q in queues.values() if q.parent}
    for k in new:
        assert queue_of(by_key[k]) not in parents, k  # only leaves take pods
    started: dict[str, int] = defaultdict(int)
    for k in new:
        started[f"{by_key[k].namespace}/{by_key[k].group_name}"] += 1
    for pg in world.podgroups:
        if started[pg.key]:
            before = sum(
                1
                for p in world.pods
                if p.bound and p.group_name == pg.name and p.key not in evicted
            )
            assert before + started[pg.key] >= pg.min_member, pg.key


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_capability_holds_for_every_pod_bound(world: World) -> None:
    result = schedule(snapshot(world.nodes, (), world.pods, world.podgroups, world.queues))
    check(world, result)


def test_the_checker_catches_a_pod_beyond_capability() -> None:
    """The checker is not vacuous: the issue's over-commit (6 GPUs against 4) fails it."""
    world = World(
        [node("a")],
        [queue("team", capability={GPU: 4000})],
        [pod(f"job-{i}", group="job", gpu=2) for i in range(3)],
        [podgroup("job", 1, queue="team")],
    )
    over = SessionResult(tuple(Binding(f"default/job-{i}", "a", None) for i in range(3)))
    try:
        check(world, over)
    except AssertionError:
        pass
    else:
        raise AssertionError("three 2-GPU pods against a 4-GPU capability passed the check")
    check(world, schedule(snapshot(world.nodes, (), world.pods, world.podgroups, world.queues)))
