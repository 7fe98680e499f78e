"""Dry runs on the live cache: what a commit changes, remembered so a trial can undo it.

A dashboard, an explain or a what-if asks what a session *would* decide now, and must
not change the long-lived cache it asks (nor rebuild one from a snapshot each time: 10 s
at 100,000 nodes). Inside ``ClusterStore.trial()`` sessions run and commit as usual, so a gang
later in the queue sees the room the gangs before it took, exactly as in a real session.
Before each commit changes anything, the cache hands this ``Journal`` the ledger rows
the transaction wrote and the entries of its tables the commit is about to change; when
the trial ends they are put back, last first. What a trial costs grows with what its
sessions decided, not with the cluster.

Entries that are replaced or added are remembered one by one and put back in place. A
table that loses entries (an assigned pod leaves ``pending``; an eviction drops the pod
everywhere) is copied whole before its first loss, so putting it back keeps its order
too: nothing read after a trial can tell one happened, except the event clock: undoing
is counted as the events it is (room freed on the nodes that took pods, the gangs
involved changed), so a ``Memory`` that learnt something inside a trial re-checks it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, MutableMapping, MutableSet
from typing import Any

from tierra.scheduler.state.transaction import Transaction
from tierra.topology.capacity import Capacity

_ABSENT = object()
Table = MutableMapping[Any, Any] | MutableSet[Any]


class Journal:
    """What a trial's commits changed in one cache (tables named by attribute)."""

    def __init__(self, capacity: Capacity) -> None:
        self.ledger = Transaction(capacity)  # every commit's ledger rows, undone LIFO
        self.entries: dict[str, dict[Hashable, Any]] = {}  # table -> key -> value before
        self.whole: dict[str, Any] = {}  # table -> its contents before it first lost one
        self.placed_on: set[int] = set()  # nodes that took pods (undoing frees their room)
        self.gangs: set[str] = set()  # gangs (or lone pods) that gained or lost pods
        self.pods: set[str] = set()  # pods placed or evicted (extensions re-read them)

    def wrote(self, txn: Transaction) -> None:
        """The ledger rows ``txn`` wrote (it is about to be committed)."""
        self.ledger.changes.extend(txn.changes)

    def keep(self, owner: object, name: str, keys: Iterable[Hashable]) -> None:
        """Remember entries ``keys`` of table ``owner.<name>`` (a dict or a set) before
        they are replaced or added."""
        if name in self.whole:
            return  # the whole copy holds them already
        table: Table = getattr(owner, name)
        saved = self.entries.setdefault(name, {})
        for k in keys:
            if k not in saved:
                if isinstance(table, MutableSet):
                    saved[k] = k in table
                else:
                    saved[k] = table.get(k, _ABSENT)

    def keep_whole(self, owner: object, name: str, *, nested: bool = False) -> None:
        """Remember table ``owner.<name>`` whole, before it loses entries; ``nested``: a
        dict of dicts whose inner dicts change too."""
        if name in self.whole:
            return
        table = getattr(owner, name)
        if nested:
            self.whole[name] = {k: dict(v) for k, v in table.items()}
        else:
            self.whole[name] = table.copy()

    def undo(self, owner: object) -> None:
        """Put back everything remembered: the ledger, whole tables, then single entries
        (those were remembered earlier than any whole copy of their table)."""
        self.ledger.rollback()
        for name, old in self.whole.items():
            table = getattr(owner, name)
            table.clear()
            table.update(old)
        for name, saved in self.entries.items():
            table = getattr(owner, name)
            for k, old in saved.items():
                if isinstance(table, MutableSet):
                    (table.add if old else table.discard)(k)
                elif old is _ABSENT:
                    table.pop(k, None)
                else:
                    table[k] = old
        self.whole.clear()
        self.entries.clear()
