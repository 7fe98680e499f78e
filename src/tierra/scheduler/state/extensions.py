"""What constraints keep beside the store's objects: a device ledger, the pod rules' index.

``store.extensions`` maps a constraint's name to what it keeps (``podrules``: the
``RulesBook``; ``devices``: the DRA ``DeviceCluster``; memos kept per index). They are
fed by their adapters, read by their constraints' hooks, and changed during a session
only through a reservation whose undo is on the transaction's log. An extension that
follows pods has ``pods_changed(store, keys)``: the store calls it with the pods that
changed (fed, removed, kept by a session, undone by a trial).

An extension that an adapter changes in place is ``Versioned``, so that a session's
view (``view.py``) can be taken once and stay as it was while the store is fed:

* the adapter changes it only inside ``store.feeding()`` (the ``upsert_*`` methods do
  the same for the store's own tables), which forks an open view first;
* the fork (once per session that is fed while it runs, between two of its gangs)
  hands the session ``fork()``, a copy it reads from then on, while the adapter goes on
  changing the original it holds; nothing is copied while nobody feeds;
* each gang the session keeps after the fork is replayed on the store at once, and
  with it, ``replay(fork, pods)``: what the session reserved in its copy for those pods
  (the devices of their claims, the volumes picked for them) is kept in the original
  too, where the adapter's binder looks for it.

A value without ``fork`` (a memo keyed by the index's generation) is shared by the
store and the view as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable

from tierra.api.pod import Pod
from tierra.scheduler.podrules.book import NAME as RULES_BOOK
from tierra.scheduler.podrules.book import RulesBook
from tierra.scheduler.state.view import Feedable, fed


@runtime_checkable
class Versioned(Protocol):
    """An extension a session's view keeps its own version of (see the module docstring)."""

    def fork(self) -> Self:
        """A copy for the open view, taken under the store's lock between two gangs: the
        session reads it from then on, and ``self`` goes on being fed. Copy what the
        adapter may change; what neither side changes in place may be shared."""
        ...

    def replay(self, fork: Self, pods: Sequence[Pod]) -> None:
        """Keep in ``self`` what the session reserved in ``fork`` for ``pods`` (a gang it
        kept, now assumed on the store); whatever no longer fits here is left out (the
        adapter's binder then plans it again, or refuses the binding)."""
        ...


class Extensions(Feedable):
    """The extensions part of ``ClusterStore`` (see the module docstring)."""

    extensions: dict[str, object]

    if TYPE_CHECKING:  # held by the other parts of the store

        def _freed(self) -> None: ...

    def _init_extensions(self) -> None:
        self.extensions = {RULES_BOOK: RulesBook()}  # asleep until a pod has rules

    def _fork_extensions(self) -> dict[str, object]:
        """The store's own table of the same extensions; the view's, with a fork of each
        ``Versioned`` one (``view.fork``)."""
        own = self.extensions
        self.extensions = dict(own)
        return {k: v.fork() if isinstance(v, Versioned) else v for k, v in own.items()}

    def _replay_extensions(self, forks: dict[str, object], pods: Sequence[Pod]) -> None:
        """What a gang the view kept after the fork reserved, kept here too."""
        for name, mine in self.extensions.items():
            theirs = forks.get(name)
            if isinstance(mine, Versioned) and isinstance(theirs, Versioned) and theirs is not mine:
                mine.replay(theirs, pods)

    @fed
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
