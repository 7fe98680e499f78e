"""The pod rules' book follows the store: every way a pod comes to hold a node, or
stops, reaches it (feeds, a rebuilt index, assume/forget, a session's commit, a trial)."""

from __future__ import annotations

from dataclasses import replace

from tests.contract.storage_docs import pv

from tierra.api.labels import LabelSelector
from tierra.api.meta import ObjectMeta
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.api.storage import Namespace
from tierra.scheduler import ClusterStore, SchedulerConfig, run_session
from tierra.scheduler.podrules import inter_pod_affinity as ipa
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


def test_a_namespace_relabelled_reindexes_the_terms_that_select_it() -> None:
    """A placed pod's anti-affinity term picks namespaces by label: relabelling a
    Namespace into (or out of) it changes which incoming pods it keeps away, at once --
    and the index gives every term back exactly when the pod goes."""
    team = LabelSelector({"team": "red"})
    rules = PlacementRules(
        anti_affinity=(
            PodAffinityTerm(HOST, LabelSelector({"app": "x"}), namespace_selector=team),
        ),
        preferred_anti_affinity=(
            PodAffinityTerm(HOST, LabelSelector({"app": "x"}), namespace_selector=team, weight=5),
        ),
    )
    store = ClusterStore(nodes=[node("a", labels={HOST: "a"}), node("b", labels={HOST: "b"})])
    book = book_of(store)
    book.upsert(Namespace(meta=ObjectMeta(name="blue", labels={"team": "blue"})))
    store.upsert_pod(replace(pod("holder", node_name="a"), rules=rules))
    incoming = replace(
        pod("p", labels={"app": "x"}),
        meta=ObjectMeta(name="p", namespace="blue", labels={"app": "x"}),
    )

    def refused() -> list[bool]:
        v = ipa.evaluate(incoming, book.nodes(store), book.placed)
        return [] if v is None else (~v.mask).tolist()

    assert refused() == [False, False]
    assert book.upsert(Namespace(meta=ObjectMeta(name="blue", labels={"team": "red"})))
    assert refused() == [True, False]
    (held,) = book.placed.soft.terms.values()
    assert held.spaces == frozenset({"blue"})
    assert book.remove(Namespace(meta=ObjectMeta(name="blue", labels={"team": "red"})))
    assert refused() == [False, False]
    store.remove_pod("default/holder")
    assert not book.placed.anti_terms and not book.placed.soft.terms


def test_a_view_and_its_forked_store_read_their_own_node_tables() -> None:
    """A session's view and the store fed meanwhile (a node added: two indexes) share
    the book: each gets its own node table, and a storage answer memoized over one is
    never read over the other (the live scheduler crashed on a (16,) and (17,) mask)."""
    store = ClusterStore(nodes=[node("a", labels={HOST: "a"}), node("b", labels={HOST: "b"})])
    book = book_of(store)
    view = store.open_view()
    store.upsert_node(node("c", labels={HOST: "c"}))  # forks the store: a third node
    old, new = book.nodes(view), book.nodes(store)
    assert (len(old), len(new)) == (2, 3)
    assert book.nodes(view) is old and book.nodes(store) is new  # both kept
    volume = pv("pv-a", hosts=("a",))
    assert book.storage.reach(volume, new).tolist() == [True, False, False]
    assert book.storage.reach(volume, old).tolist() == [True, False]
    assert book.storage.reach(volume, new).tolist() == [True, False, False]
    store.close_view(view)
