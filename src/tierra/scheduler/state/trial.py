"""Dry runs on the live cache: what a commit changes, remembered so a trial can undo it.

A dashboard, an explain or a what-if asks what a session *would* decide now, and must
not change the long-lived cache it asks (nor rebuild one from a snapshot each time: 10 s
at 100,000 nodes). Inside ``ClusterStore.trial()`` sessions run and commit as usual, so a gang
later in the queue sees the room the gangs before it took, exactly as in a real session.
Before each commit changes anything, the cache hands this ``Journal`` the ledger rows
the transaction wrote and the entries of its tables the commit is about to change; when
the trial ends they are put back, last first: one undo log, a ``Transaction`` like the
session's own, its table entries undos on the same log. What a trial costs grows with what its
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
    """What a trial's commits changed in one store, as one undo log: a ``Transaction``.

    Every commit's ledger rows (``wrote``) and every table entry it is about to change
    (``keep``, ``keep_whole``: an undo each, ``Transaction.on_undo``) join the same log in
    the order they happen; ``undo`` rolls it back last first, exactly as a session rolls
    back a failed attempt (and with it any constraint's reservation undo the commits
    carried)."""

    def __init__(self, capacity: Capacity) -> None:
        self.log = Transaction(capacity)
        self.whole: set[str] = set()  # tables copied whole (later single entries: in it)
        self.placed_on: set[int] = set()  # nodes that took pods (undoing frees their room)
        self.gangs: set[str] = set()  # gangs (or lone pods) that gained or lost pods

    def wrote(self, txn: Transaction) -> None:
        """The ledger rows (and undos) ``txn`` wrote (it is about to be committed)."""
        self.log.changes.extend(txn.changes)

    def keep(self, owner: object, name: str, keys: Iterable[Hashable]) -> None:
        """Remember entries ``keys`` of table ``owner.<name>`` (a dict or a set) before
        they are replaced or added."""
        if name in self.whole:
            return  # the whole copy holds them already
        table: Table = getattr(owner, name)
        if isinstance(table, MutableSet):
            members = {k: k in table for k in keys}

            def put_back_members() -> None:
                for k, was in members.items():
                    (table.add if was else table.discard)(k)

            self.log.on_undo(put_back_members)
            return
        values = {k: table.get(k, _ABSENT) for k in keys}

        def put_back() -> None:
            for k, old in values.items():
                if old is _ABSENT:
                    table.pop(k, None)
                else:
                    table[k] = old

        self.log.on_undo(put_back)

    def keep_whole(self, owner: object, name: str, *, nested: bool = False) -> None:
        """Remember table ``owner.<name>`` whole, before it loses entries; ``nested``: a
        dict of dicts whose inner dicts change too."""
        if name in self.whole:
            return
        self.whole.add(name)
        table = getattr(owner, name)
        old = {k: dict(v) for k, v in table.items()} if nested else table.copy()

        def put_back() -> None:
            table.clear()
            table.update(old)

        self.log.on_undo(put_back)

    def undo(self) -> None:
        """Put back everything remembered, last first."""
        self.log.rollback()
        self.whole.clear()
