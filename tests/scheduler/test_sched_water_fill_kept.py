"""The queue book keeps its last water-filling: the same input gives the same shares
(and each book its own arrays); a changed want or a changed queue fills again."""

from __future__ import annotations

import numpy as np

from tierra.scheduler import ClusterStore
from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.queueing.shares import deserved_shares
from tierra.scheduler.testing import canonical, pod, podgroup, queue, snapshot

GPU = "nvidia.com/gpu"


def _store(weight_b: int = 1) -> ClusterStore:
    nodes, hns = canonical()
    running = [pod("a0-0", group="a0", node_name="node-0", gpu=8)]
    qs = [queue("a"), queue("b", weight=weight_b)]
    return ClusterStore.from_snapshot(
        snapshot(nodes, hns, running, [podgroup("a0", 1, queue="a")], qs)
    )


def _from_scratch(book: QueueBook) -> dict[str, np.ndarray]:
    own = book.own_usage()
    zero = np.zeros(len(book.names), dtype=np.int64)
    want = {
        q: (own.get(q, zero) + book._demands.get(q, zero)).astype(np.float64)
        for q in book.tree.order
    }
    lims = {q: book.limits(q) for q in book.tree.order}
    return deserved_shares(book.tree, book.total.astype(np.float64), want, lims)


def _equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_the_same_input_gives_the_same_shares_in_arrays_of_its_own() -> None:
    store = _store()
    g = store.capacity.axis.index[GPU]
    demand = np.zeros(len(store.capacity.axis), dtype=np.int64)
    demand[g] = 32_000
    first = QueueBook(store, {"b": demand}, {"b"})
    second = QueueBook(store, {"b": demand.copy()}, {"b"})
    assert _equal(first.deserved, _from_scratch(first))
    assert _equal(second.deserved, first.deserved)
    second.deserved["b"][g] = -1.0  # a book's arrays are its own
    assert first.deserved["b"][g] != -1.0
    assert _equal(QueueBook(store, {"b": demand}, {"b"}).deserved, _from_scratch(first))


def test_a_changed_want_or_weight_fills_again() -> None:
    store = _store()
    g = store.capacity.axis.index[GPU]
    small, large = (np.zeros(len(store.capacity.axis), dtype=np.int64) for _ in range(2))
    small[g], large[g] = 8_000, 56_000
    a = QueueBook(store, {"b": small}, {"b"}).deserved
    b = QueueBook(store, {"b": large}, {"b"})
    assert _equal(b.deserved, _from_scratch(b))
    assert not _equal(a, b.deserved)
    heavier = _store(weight_b=3)
    c = QueueBook(heavier, {"b": large}, {"b"})
    assert _equal(c.deserved, _from_scratch(c))
