"""The pod rules' index during one gang's attempt (``podrules/constraints.attempt_placed``):
a gang whose pods keep apart from each other is placed pod by pod, each read against
the ones before it; each pod enters the index once, and a rolled-back attempt (or a
trial) leaves the index exactly as it found it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from tests.scheduler.helpers import add

from tierra.api.labels import LabelSelector
from tierra.api.pod import Pod
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.scheduler import ClusterStore, run_session
from tierra.scheduler.podrules.book import book_of
from tierra.scheduler.podrules.state import PodIndex
from tierra.scheduler.testing import canonical, podgroup
from tierra.scheduler.testing import pod as make_pod

HOST = "kubernetes.io/hostname"


def store() -> ClusterStore:
    nodes, hns = canonical()
    nodes = [replace(n, meta=replace(n.meta, labels={HOST: n.name})) for n in nodes]
    return ClusterStore(nodes=nodes, hypernodes=hns)


def apart(name: str, app: str, *, group: str | None = None, on: str = "") -> Pod:
    """A pod kept off any node holding a pod of its app (itself included)."""
    term = PodAffinityTerm(HOST, LabelSelector({"app": app}))
    p = make_pod(name, group=group, gpu=1, labels={"app": app}, node_name=on)
    return replace(p, rules=PlacementRules(anti_affinity=(term,)))


def gang(name: str, size: int) -> list[Any]:
    return [podgroup(name, size), *(apart(f"{name}-{i}", name, group=name) for i in range(size))]


def state(index: PodIndex) -> tuple[Any, ...]:
    """What the index holds, comparable (order of insertion included)."""
    return (
        [(k, e.pod.key, e.node) for k, e in index.entries.items()],
        [(k, sorted(v)) for k, v in index.by_label.items()],
        [(k, sorted(v)) for k, v in index.by_namespace.items()],
        [(k, dict(h.nodes)) for k, h in index.anti_terms.items()],
        [(k, sorted(map(str, v))) for k, v in index.anti_by_label.items()],
    )


@pytest.fixture
def adds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pod key ``PodIndex.add`` is called with."""
    seen: list[str] = []
    real = PodIndex.add

    def counting(self: PodIndex, pod: Pod, node: str) -> None:
        seen.append(pod.key)
        real(self, pod, node)

    monkeypatch.setattr(PodIndex, "add", counting)
    return seen


def test_a_gang_placed_pod_by_pod_adds_each_pod_to_the_index_once(adds: list[str]) -> None:
    cache = store()
    add(cache, apart("guard", "other", on="node-0"), *gang("job", 7))
    adds.clear()
    result = run_session(cache)
    nodes = {b.pod: b.node for b in result.bindings}
    assert len(nodes) == 7 and len(set(nodes.values())) == 7, result.unschedulable
    # once tentatively, once more when the kept gang's pods are re-read from the store
    # (their node now set); the pod-by-pod reading once added every earlier pod per pod
    assert all(adds.count(k) <= 2 for k in nodes), sorted(adds)
    assert len(adds) <= 2 * 7
    assert set(book_of(cache).placed.entries) == {"default/guard", *nodes}


def test_a_gang_that_does_not_fit_leaves_the_index_as_it_was() -> None:
    cache = store()
    add(cache, apart("guard", "job", on="node-0"), *gang("job", 8))  # 7 nodes left for 8
    book = book_of(cache)
    before = state(book.placed)
    result = run_session(cache)
    assert not result.bindings and [u.podgroup for u in result.unschedulable] == ["default/job"]
    assert state(book.placed) == before


def test_a_trial_leaves_the_index_as_it_was() -> None:
    cache = store()
    add(cache, apart("guard", "other", on="node-0"), *gang("job", 6))
    book = book_of(cache)
    before = state(book.placed)
    with cache.trial():
        result = run_session(cache)
        assert len(result.bindings) == 6
        assert len(book_of(cache).placed.entries) == 7
    assert state(book_of(cache).placed) == before
