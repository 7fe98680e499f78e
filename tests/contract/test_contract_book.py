"""The pod rules' book follows the store: every way a pod comes to hold a node, or
stops, reaches it (feeds, a rebuilt index, assume/forget, a session's commit, a trial)."""

from __future__ import annotations

from dataclasses import replace

from tierra.api.labels import LabelSelector
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.scheduler import ClusterStore, SchedulerConfig, run_session
from tierra.scheduler.podrules.book import book_of
from tierra.scheduler.testing import node, pod

HOST = "kubernetes.io/hostname"
ANTI = PlacementRules(anti_affinity=(PodAffinityTerm(HOST, LabelSelector({"app": "x"})),))


def test_asleep_until_a_pod_has_rules_then_indexes_every_holder() -> None:
    store = ClusterStore(nodes=[node("a", labels={HOST: "a"})])
    store.upsert_pod(pod("plain", node_name="a", labels={"app": "x"}))
    book = book_of(store)
    assert not book.awake and not book.placed.entries
    store.upsert_pod(replace(pod("ruled", labels={"app": "x"}), rules=ANTI))
    assert book.awake and set(book.placed.entries) == {"default/plain"}
    store.remove_pod("default/plain")
    assert not book.placed.entries and not book.placed.by_label


def test_pods_held_when_a_batch_rebuilds_the_index_reach_the_book() -> None:
    store = ClusterStore(nodes=[node("a", labels={HOST: "a"})])
    store.upsert_pod(replace(pod("ruled", labels={"app": "x"}), rules=ANTI))
    with store.batch():
        store.upsert_node(node("b", labels={HOST: "b"}))
        store.upsert_pod(pod("on-b", node_name="b", labels={"app": "x"}))
    assert book_of(store).placed.entries["default/on-b"].node == "b"


def test_a_session_commit_assume_forget_and_a_trial() -> None:
    store = ClusterStore(nodes=[node("a", labels={HOST: "a"}), node("b", labels={HOST: "b"})])
    book = book_of(store)
    first = replace(pod("first", labels={"app": "x"}), rules=ANTI)
    store.upsert_pod(first)
    with store.trial():
        run_session(store, SchedulerConfig())
        assert "default/first" in book.placed.entries
    assert "default/first" not in book.placed.entries  # undone with the trial
    result = run_session(store, SchedulerConfig())
    (b,) = result.bindings
    assert book.placed.entries["default/first"].node == b.node
    store.forget("default/first")
    assert "default/first" not in book.placed.entries
    store.assume("default/first", "b")
    assert book.placed.entries["default/first"].node == "b"
