"""The pod rules' tallies (``podrules/tallies.py``): per selector, the matching placed pods
per node, kept up to date as pods are fed, assumed, forgotten, bound and removed, must
equal a count from scratch over the store's placed pods -- in the store, and in a
session view's fork of the book as both go their own ways."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.pod import Pod
from tierra.api.pod_rules import PlacementRules, PodAffinityTerm
from tierra.scheduler import ClusterStore
from tierra.scheduler.podrules.book import RulesBook, book_of
from tierra.scheduler.podrules.state import PodIndex
from tierra.scheduler.testing import node, pod

HOST = "kubernetes.io/hostname"
NODES = ("n0", "n1", "n2", "n3")
NAMESPACES = ("default", "other")
SELECTORS = (
    LabelSelector({"app": "a"}),
    LabelSelector({"app": "b", "tier": "x"}),
    LabelSelector({}, (Requirement("app", Operator.IN, ("a", "b")),)),
    LabelSelector({}, (Requirement("tier", Operator.NOT_IN, ("x",)),)),
    LabelSelector({}, (Requirement("tier", Operator.EXISTS),)),
    LabelSelector(),  # matches every pod
)
SPACES = (None, frozenset({"default"}), frozenset({"other"}), frozenset(NAMESPACES))
LABELS = st.fixed_dictionaries(
    {},
    optional={"app": st.sampled_from(("a", "b", "c")), "tier": st.sampled_from(("x", "y"))},
)


def recount(index: PodIndex, selector: LabelSelector, spaces: frozenset[str] | None) -> dict:
    """The tally from scratch: every placed pod tested."""
    out: dict[str, int] = {}
    for entry in index.entries.values():
        p = entry.pod
        if (spaces is None or p.namespace in spaces) and selector.matches(p.meta.labels):
            out[entry.node] = out.get(entry.node, 0) + 1
    return out


def placed_in_store(store: ClusterStore) -> dict[str, str]:
    names = store.index.node_names
    return {k: names[n] for k, n in store.node_of.items()}


def check(index: PodIndex) -> None:
    """Every tally kept equals its recount, and no kept tally is empty."""
    for tally in index.tallies.by_key.values():
        assert tally.nodes, "an empty tally is dropped"
        assert tally.nodes == recount(index, tally.selector, tally.spaces)


def guard(name: str) -> Pod:
    """A pod with rules, so the book wakes (pods without rules are indexed too)."""
    term = PodAffinityTerm(HOST, LabelSelector({"app": "a"}))
    return replace(pod(name, labels={"app": "a"}), rules=PlacementRules(anti_affinity=(term,)))


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("feed"), st.integers(0, 3), LABELS),
        st.tuples(st.just("assume"), st.integers(0, 3), st.sampled_from(NODES)),
        st.tuples(st.just("forget"), st.integers(0, 3)),
        st.tuples(st.just("bind"), st.integers(0, 3), st.sampled_from(NODES)),
        st.tuples(st.just("remove"), st.integers(0, 3)),
        st.tuples(st.just("ask"), st.sampled_from(SELECTORS), st.sampled_from(SPACES)),
    ),
    max_size=60,
)


def apply(store: ClusterStore, op: tuple) -> None:
    """One operation on the store, as the adapter or a session's commit makes it."""
    kind, *args = op
    book = book_of(store)
    if kind == "ask":
        selector, spaces = args
        assert dict(book.placed.tally(selector, spaces)) == recount(book.placed, selector, spaces)
        return
    namespace = NAMESPACES[args[0] % 2]  # pod i always lives in the same namespace
    key = f"{namespace}/p{args[0]}"
    current = store.pods.get(key)
    if kind == "feed":  # a new pod, or new labels for a pending one
        if current is None or key in store.pending:
            store.upsert_pod(pod(f"p{args[0]}", labels=args[1], namespace=namespace))
    elif kind == "assume" and current is not None and key in store.pending:
        store.assume(key, args[1])
    elif kind == "forget":
        store.forget(key)
    elif kind == "bind" and current is not None:
        store.upsert_pod(replace(current, node_name=args[1]))
    elif kind == "remove":
        store.remove_pod(key)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_tallies_follow_assume_forget_bind_and_remove(ops: list[tuple]) -> None:
    store = ClusterStore(nodes=[node(n, labels={HOST: n}) for n in NODES])
    store.upsert_pod(replace(guard("guard"), node_name="n0"))
    book = book_of(store)
    assert book.awake
    for op in ops:
        apply(store, op)
        placed = book.placed
        assert {k: e.node for k, e in placed.entries.items()} == placed_in_store(store)
        check(placed)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(LABELS, st.sampled_from(NODES)), max_size=8),
    st.lists(st.tuples(st.sampled_from(SELECTORS), st.sampled_from(SPACES)), max_size=6),
    st.lists(st.tuples(st.booleans(), st.integers(0, 11), LABELS, st.sampled_from(NODES))),
)
def test_a_forked_book_tallies_on_its_own(
    before: list[tuple[dict[str, str], str]],
    asked: list[tuple[LabelSelector, frozenset[str] | None]],
    after: list[tuple[bool, int, dict[str, str], str]],
) -> None:
    """Tallies asked before the fork are copied with it; then the original and the fork
    each place and take out pods of their own (the store fed, the session trying a
    gang), and each one's tallies follow its own pods only."""
    book = RulesBook()
    book.awake = True
    for i, (labels, at) in enumerate(before):
        book.place(pod(f"b{i}", labels=labels), at)
    for selector, spaces in asked:
        book.placed.tally(selector, spaces)
    twin = book.fork()
    own: dict[int, set[str]] = {id(book): set(), id(twin): set()}
    for to_twin, i, labels, at in after:
        which = twin if to_twin else book
        key = f"default/x{i}"
        if key in which.placed.entries:
            which.placed.remove(key)
            own[id(which)].discard(key)
        else:
            which.place(pod(f"x{i}", labels=labels), at)
            own[id(which)].add(key)
        for selector, spaces in asked:  # asked again: made anew once a tally fell empty
            which.placed.tally(selector, spaces)
    common = {f"default/b{i}" for i in range(len(before))}
    for b in (book, twin):
        assert set(b.placed.entries) == common | own[id(b)]
        check(b.placed)
        for selector, spaces in asked:
            assert dict(b.placed.tally(selector, spaces)) == recount(b.placed, selector, spaces)


def test_counted_at_names_the_node_of_the_pod_itself() -> None:
    book = RulesBook()
    book.awake = True
    me = pod("me", labels={"app": "a"})
    book.place(me, "n1")
    book.place(pod("other", labels={"app": "a"}), "n1")
    sel = LabelSelector({"app": "a"})
    assert dict(book.placed.tally(sel, None)) == {"n1": 2}
    assert book.placed.counted_at(me, sel, None) == "n1"
    assert book.placed.counted_at(me, sel, frozenset({"other"})) is None
    assert book.placed.counted_at(pod("stranger", labels={"app": "a"}), sel, None) is None
