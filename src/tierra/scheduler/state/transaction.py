"""Tentative placements on the capacity ledger, undone last-in-first-out unless kept.

A gang is tried inside one transaction: every pod placed (and every pod evicted for it)
changes the live ledger at once, so later counts see it, and is logged. If the whole
gang does not fit, ``rollback`` walks the log backwards and the ledger is exactly as it
was; ``mark``/``rollback(mark)`` nest for trying one domain, or one sub-group, at a
time. Nothing outside the transaction writes to the ledger during a session.

A constraint that reserves something at placement (devices, volumes: the protocol's
``reserve``) registers its undo with ``on_undo``: it joins the same log, so a rollback
(or the end of a trial, which replays committed logs backwards) undoes it in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tierra.api.pod import Pod
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class Mark:
    changes: int
    assigned: int
    evicted: int


Change = tuple[IntArray, IntArray] | Callable[[], None]  # (nodes, rows added) or an undo


class Transaction:
    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self.changes: list[Change] = []  # (nodes, rows added to used), or a reservation's undo
        self.assigned: list[tuple[Pod, int, IntArray]] = []  # (pod, node, request)
        self.evicted: list[tuple[str, int, IntArray]] = []  # (pod key, node, request)
        # every node array the ledger changed on, undos included, for as long as the
        # transaction lives (a session): what the flat path's kept scores must redo
        self.touched: list[IntArray] = []

    def _apply(self, nodes: IntArray, rows: IntArray) -> None:
        """Add ``rows`` to the used amounts of ``nodes`` and of every domain above them."""
        cap = self.capacity
        ix = cap.index
        self.touched.append(nodes)
        cap.moved(nodes)  # the ledger's kept fit counts recount these rows
        if len(nodes) == 1:  # a lone pod's (the common case): no scatter needed
            n = int(nodes[0])
            cap.node_used[n] += rows[0]
            cap.dom_used[ix.domains_of(n)] += rows[0]
            return
        np.add.at(cap.node_used, nodes, rows)
        starts, ends = ix.domain_ptr[nodes], ix.domain_ptr[nodes + 1]
        lens = ends - starts
        first = np.repeat(np.cumsum(lens) - lens, lens)
        entries = np.arange(int(lens.sum()), dtype=np.int64) - first + np.repeat(starts, lens)
        np.add.at(cap.dom_used, ix.domain_idx[entries], np.repeat(rows, lens, axis=0))

    def place(self, pods: Sequence[Pod], node: int, vec: IntArray) -> None:
        """Put ``pods`` (all of request ``vec``) on ``node``."""
        if pods:
            self.place_plan(pods, [(node, len(pods))], vec)

    def place_plan(
        self, pods: Sequence[Pod], plan: Sequence[tuple[int, int]], vec: IntArray
    ) -> None:
        """Put ``pods`` in order on the plan's nodes, ``k`` on each ``(node, k)``."""
        if not plan:
            return
        nodes = np.array([n for n, _ in plan], dtype=np.int64)
        ks = np.array([k for _, k in plan], dtype=np.int64)
        rows = ks[:, None] * vec[None, :]
        self._apply(nodes, rows)
        self.changes.append((nodes, rows))
        i = 0
        for n, k in plan:
            self.assigned.extend((p, n, vec) for p in pods[i : i + k])
            i += k

    def evict(self, key: str, node: int, vec: IntArray) -> None:
        nodes = np.array([node], dtype=np.int64)
        rows = -vec[None, :]
        self._apply(nodes, rows)
        self.changes.append((nodes, rows))
        self.evicted.append((key, node, vec))

    def on_undo(self, undo: Callable[[], None]) -> None:
        """Call ``undo`` when this point of the log is rolled back (never once kept)."""
        self.changes.append(undo)

    def mark(self) -> Mark:
        return Mark(len(self.changes), len(self.assigned), len(self.evicted))

    def rollback(self, to: Mark | None = None) -> None:
        mark = to or Mark(0, 0, 0)
        while len(self.changes) > mark.changes:
            change = self.changes.pop()
            if callable(change):
                change()
            else:
                self._apply(change[0], -change[1])
        del self.assigned[mark.assigned :]
        del self.evicted[mark.evicted :]

    def commit(self) -> None:
        """Keep everything; the log is dropped (the ledger already holds it)."""
        self.changes.clear()
        self.assigned.clear()
        self.evicted.clear()
