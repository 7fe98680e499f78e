"""``Constraint.applies`` (kube-scheduler's PreFilter ``Skip``): a constraint that says
False for a gang is asked nothing for it; the cycle carries the narrowed hooks.

The decisions themselves do not change (``test_sched_golden.py`` compares them byte for
byte); these tests pin what is skipped and what is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.scheduler.helpers import add

from tierra.api.labels import LabelSelector
from tierra.api.pod import Pod
from tierra.api.pod_rules import (
    DO_NOT_SCHEDULE,
    HostPort,
    PlacementRules,
    PodAffinityTerm,
    SpreadConstraint,
)
from tierra.api.podgroup import PodGroup
from tierra.scheduler import ClusterStore, SchedulerConfig, run_session
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.scheduler.constraints.registry import DEFAULT
from tierra.scheduler.placement.demand import Shape
from tierra.scheduler.testing import canonical, podgroup, topology
from tierra.scheduler.testing import pod as make_pod
from tierra.topology.index import IntArray

HOST = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class NoneFor(Constraint):
    """Caps every node at 0 for the gangs it applies to: those not named ``free*``."""

    name = "none-for"
    asked: list[str] = field(default_factory=list, compare=False, hash=False)

    def applies(self, cycle: Cycle) -> bool:
        return cycle.gang is None or not cycle.gang.key.split("/")[-1].startswith("free")

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        assert cycle.gang is not None
        self.asked.append(cycle.gang.key)
        return np.zeros(len(nodes), dtype=np.int64)

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        return Refusal(self, "none", capped)


@dataclass(frozen=True, slots=True)
class Spy(Constraint):
    """Keeps every cycle it is asked about, to read the hooks it was given."""

    name = "spy"
    cycles: list[Cycle] = field(default_factory=list, compare=False, hash=False)

    def applies(self, cycle: Cycle) -> bool:
        self.cycles.append(cycle)
        return True


def store() -> ClusterStore:
    nodes, hns = canonical()
    nodes = [replace(n, meta=replace(n.meta, labels={HOST: n.name})) for n in nodes]
    return ClusterStore(nodes=nodes, hypernodes=hns)


def apart(name: str, app: str, *, group: str | None = None, on: str = "") -> Pod:
    """A pod kept off any node holding a pod of its app (required anti-affinity)."""
    term = PodAffinityTerm(HOST, LabelSelector({"app": app}))
    p = make_pod(name, group=group, gpu=1, labels={"app": app}, node_name=on)
    return replace(p, rules=PlacementRules(anti_affinity=(term,)))


def plain(name: str, size: int, app: str = "") -> list[Pod | PodGroup]:
    labels = {"app": app} if app else {}
    pods = [make_pod(f"{name}-{i}", group=name, gpu=1, labels=labels) for i in range(size)]
    return [podgroup(name, size, network_topology=topology(tier=2)), *pods]


def asked(spy: Spy, gang: str) -> set[str]:
    """The constraints the cycle of ``gang`` asks at any hook."""
    cycle = next(c for c in spy.cycles if c.gang is not None and c.gang.key == gang)
    hooks = cycle.hooks
    every = (*hooks.admit, *hooks.candidates, *hooks.node_caps, *hooks.domain_scores)
    return {c.name for c in (*every, *hooks.pod_scores, *hooks.reserve)}


def test_a_constraint_that_does_not_apply_is_not_asked() -> None:
    toy = NoneFor()
    config = replace(SchedulerConfig(), constraints=(*DEFAULT, toy))
    cache = store()
    add(cache, *plain("free", 2), *plain("held", 2))
    result = run_session(cache, config)
    assert {b.pod.split("/")[1].rsplit("-", 1)[0] for b in result.bindings} == {"free"}
    assert {u.podgroup for u in result.unschedulable} == {"default/held"}
    assert toy.asked and set(toy.asked) == {"default/held"}


def test_a_plain_gang_skips_what_has_nothing_to_say() -> None:
    spy = Spy()
    config = replace(SchedulerConfig(), constraints=(*DEFAULT, spy))
    cache = store()
    add(cache, *plain("job", 4))
    assert len(run_session(cache, config).bindings) == 4
    names = asked(spy, "default/job")
    skipped = {
        "node-ports",
        "inter-pod-affinity",
        "pod-topology-spread",
        "volume-binding",
        "nominated-room",
        "devices",
        "bounded-wait",
        "exclusive",
        "node-repair",
        "nvlink-cliques",
        "node-affinity-score",
        "inter-pod-affinity-score",
        "pod-topology-spread-score",
        "kueue-inner-slices",
        "rank-order",
    }
    assert not names & skipped, names & skipped
    assert {"tier-limit", "policy-scores"} <= names


def test_placed_anti_affinity_still_reaches_a_gang_without_rules() -> None:
    """The symmetric direction: a placed pod's required anti-affinity refuses pods that
    have no rules of their own, so ``InterPodAffinity`` applies to them (the filters
    that read only the pod's own rules do not)."""
    spy = Spy()
    config = replace(SchedulerConfig(), constraints=(*DEFAULT, spy))
    cache = store()
    add(cache, apart("guard", "web", on="node-0"), *plain("job", 2, app="web"))
    result = run_session(cache, config)
    names = asked(spy, "default/job")
    assert "inter-pod-affinity" in names
    assert not names & {"node-ports", "pod-topology-spread", "volume-binding"}
    assert len(result.bindings) == 2
    assert "node-0" not in {b.node for b in result.bindings}


def test_a_gang_with_rules_is_asked_by_every_pod_rule() -> None:
    spy = Spy()
    config = replace(SchedulerConfig(), constraints=(*DEFAULT, spy))
    cache = store()
    add(cache, podgroup("job", 3), *(apart(f"job-{i}", "job", group="job") for i in range(3)))
    result = run_session(cache, config)
    assert len({b.node for b in result.bindings}) == 3
    names = asked(spy, "default/job")
    assert {"node-ports", "inter-pod-affinity", "pod-topology-spread", "volume-binding"} <= names


RULES = {
    "none": None,
    "apart": lambda app: PlacementRules(
        anti_affinity=(PodAffinityTerm(HOST, LabelSelector({"app": app})),)
    ),
    "near": lambda app: PlacementRules(
        preferred_affinity=(PodAffinityTerm(HOST, LabelSelector({"app": app}), weight=50),)
    ),
    "spread": lambda app: PlacementRules(
        spread=(SpreadConstraint(1, HOST, DO_NOT_SCHEDULE, LabelSelector({"app": app})),)
    ),
    "port": lambda app: PlacementRules(host_ports=(HostPort(8080),)),
}


@st.composite
def workloads(draw: st.DrawFn) -> list[Pod | PodGroup]:
    """Placed pods with or without rules, then gangs with or without them (some with
    members beyond their minimum), labelled so one's rules may reach another's pods."""
    objs: list[Pod | PodGroup] = []
    apps = ("a", "b")
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(sorted(RULES)))
        app = draw(st.sampled_from(apps))
        p = make_pod(f"placed-{i}", gpu=1, labels={"app": app}, node_name=f"node-{i}")
        rules = RULES[kind]
        objs.append(p if rules is None else replace(p, rules=rules(app)))
    for g in range(draw(st.integers(1, 4))):
        name = f"g{g}"
        size = draw(st.integers(1, 4))
        kind = draw(st.sampled_from(sorted(RULES)))
        app = draw(st.sampled_from(apps))
        tier = draw(st.sampled_from([None, 1, 2]))
        nt = topology(tier=tier) if tier is not None else None
        objs.append(podgroup(name, draw(st.integers(1, size)), network_topology=nt))
        for i in range(size):
            gpu = draw(st.sampled_from([1, 2, 4]))
            p = make_pod(f"{name}-{i}", group=name, gpu=gpu, labels={"app": app})
            rules = RULES[kind]
            objs.append(p if rules is None else replace(p, rules=rules(app)))
    return objs


def decide(objs: list[Pod | PodGroup]) -> tuple[object, ...]:
    cache = store()
    add(cache, *objs)
    result = run_session(cache)
    return (
        sorted((b.pod, b.node) for b in result.bindings),
        sorted((u.podgroup, u.status.code, u.status.reason) for u in result.unschedulable),
    )


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_skipping_changes_no_decision(objs: list[Pod | PodGroup]) -> None:
    """The same decisions and reasons with every constraint asked at every hook."""
    skipping = decide(objs)
    with patch("tierra.scheduler.placement.allocate.applying", lambda c: c.hooks):
        asking_all = decide(objs)
    assert skipping == asking_all
