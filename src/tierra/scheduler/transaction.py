"""Tentative placements on the capacity ledger, undone last-in-first-out unless kept.

A gang is tried inside one transaction: every pod placed (and every pod evicted for it)
changes the live ledger at once, so later counts see it, and is logged. If the whole
gang does not fit, ``rollback`` walks the log backwards and the ledger is exactly as it
was; ``mark``/``rollback(mark)`` nest for trying one domain, or one sub-group, at a
time. Nothing outside the transaction writes to the ledger during a session.
"""

from __future__ import annotations

from dataclasses import dataclass

from tierra.api.pod import Pod
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class Mark:
    changes: int
    assigned: int
    evicted: int


class Transaction:
    def __init__(self, capacity: Capacity) -> None:
        self.capacity = capacity
        self.changes: list[tuple[int, IntArray]] = []  # (node, delta applied to used)
        self.assigned: list[tuple[Pod, int, IntArray]] = []  # (pod, node, request)
        self.evicted: list[tuple[str, int, IntArray]] = []  # (pod key, node, request)

    def place(self, pods: list[Pod], node: int, vec: IntArray) -> None:
        """Put ``pods`` (all of request ``vec``) on ``node``."""
        if not pods:
            return
        total = vec * len(pods)
        self.capacity.place(node, total)
        self.changes.append((node, total))
        self.assigned.extend((p, node, vec) for p in pods)

    def evict(self, key: str, node: int, vec: IntArray) -> None:
        self.capacity.remove(node, vec)
        self.changes.append((node, -vec))
        self.evicted.append((key, node, vec))

    def mark(self) -> Mark:
        return Mark(len(self.changes), len(self.assigned), len(self.evicted))

    def rollback(self, to: Mark | None = None) -> None:
        mark = to or Mark(0, 0, 0)
        while len(self.changes) > mark.changes:
            node, delta = self.changes.pop()
            self.capacity.remove(node, delta)
        del self.assigned[mark.assigned :]
        del self.evicted[mark.evicted :]

    def commit(self) -> None:
        """Keep everything; the log is dropped (the ledger already holds it)."""
        self.changes.clear()
        self.assigned.clear()
        self.evicted.clear()
