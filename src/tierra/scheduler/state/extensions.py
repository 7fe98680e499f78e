"""What constraints keep beside the store's objects: a device ledger, the pod rules' index.

``store.extensions`` maps a constraint's name to what it keeps (``podrules``: the
``RulesBook``; ``devices``: the DRA ``DeviceCluster``; memos kept per index). They are
fed by their adapters, read by their constraints' hooks, and changed during a session
only through a reservation whose undo is on the transaction's log. An extension that
follows pods has ``pods_changed(store, keys)``: the store calls it with the pods that
changed (fed, removed, kept by a session, undone by a trial).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from tierra.scheduler.podrules.book import NAME as RULES_BOOK
from tierra.scheduler.podrules.book import RulesBook


class Extensions:
    """The extensions part of ``ClusterStore`` (see the module docstring)."""

    extensions: dict[str, object]

    if TYPE_CHECKING:  # held by the other parts of the store

        def _freed(self) -> None: ...

    def _init_extensions(self) -> None:
        self.extensions = {RULES_BOOK: RulesBook()}  # asleep until a pod has rules

    def _fork_extensions(self) -> None:
        """Own copy of the table a view shares (``view.fork``)."""
        self.extensions = dict(self.extensions)

    def extension_changed(self) -> None:
        """What an extension reads beside the objects changed (a StorageClass, a PVC):
        waiting gangs may fit now, as when room is freed."""
        self._freed()

    def _pods_changed(self, keys: Iterable[str]) -> None:
        """Tell the extensions that follow pods (``pods_changed``) which pods changed."""
        for ext in self.extensions.values():
            follow = getattr(ext, "pods_changed", None)
            if follow is not None:
                follow(self, keys)
