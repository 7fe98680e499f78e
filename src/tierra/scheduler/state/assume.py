"""Bindings in flight: assumed, confirmed or forgotten; a session's commit; dry runs.

A session keeps its bindings as *assumed* (``commit``): they hold room until
``upsert_pod`` shows the pod bound (confirmed) or ``forget`` releases them; while the
API still shows an assumed pod pending, it stays assumed. An adapter may also assume a
binding made outside a session (``assume``). Evicted pods are removed.

``trial()`` is a dry run over the same store: sessions inside it commit as usual, and
what they committed is undone when it ends, by one undo log (``trial.Journal``, a
``Transaction``'s) fed before each commit changes anything (``_remember``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Self

from tierra.api.pod import Pod
from tierra.scheduler.state.trial import Journal
from tierra.scheduler.state.usage import _rebound, gang_key
from tierra.scheduler.state.view import Feedable, fed
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.state.transaction import Transaction
    from tierra.topology.capacity import Capacity
    from tierra.topology.index import TopologyIndex


class Assuming(Feedable):
    """The assume/forget part of ``ClusterStore`` (see the module docstring)."""

    assumed: set[str]  # bound by a session, not yet confirmed
    _journal: Journal | None  # inside ``trial()``: what commits changed

    if TYPE_CHECKING:  # held by the other parts of the store
        index: TopologyIndex
        capacity: Capacity
        pods: dict[str, Pod]
        pending: dict[str, None]
        gang_of: dict[str, str | None]
        node_of: dict[str, int]
        vec_of: dict[str, IntArray]
        priorities: Counter[int]
        gang_used: dict[str, IntArray]
        solo_used: dict[str, IntArray]
        _stale: bool
        extensions: dict[str, object]

        def _touched(self, gang: str) -> None: ...
        def _freed_on(self, node: int) -> None: ...
        def _forget(self, key: str, *, release: bool) -> None: ...
        def _pods_changed(self, keys: Iterable[str]) -> None: ...
        def _shape(self, key: str, group: str | None, vec: IntArray, sign: int) -> None: ...
        def _held(self, gang: str, sign: int) -> None: ...
        def _queue_add(self, queue: str, delta: IntArray) -> None: ...
        def gang_queue(self, gang: str) -> str: ...
        def request_vector(self, pod: Pod) -> IntArray: ...
        def _assumed(self, assigned: Sequence[tuple[Pod, int, IntArray]]) -> None: ...
        def upsert_pod(self, pod: Pod) -> None: ...
        def remove_pod(self, key: str) -> None: ...

    def _init_assume(self) -> None:
        self.assumed = set()
        self._journal = None

    @fed
    def assume(self, pod_key: str, node: str) -> None:
        """A binding in flight: the pending pod ``pod_key`` holds ``node``'s resources
        until the API shows it bound (``upsert_pod``) or the binding fails (``forget``)."""
        pod = self.pods.get(pod_key)
        n = self.index.node_ix.get(node)
        if pod is None or pod_key not in self.pending:
            raise KeyError(f"assume: no pending pod {pod_key}")
        if n is None or self._stale:
            raise KeyError(f"assume: no node {node}")
        vec = self.request_vector(pod)
        self.capacity.place(n, vec)
        self._assumed([(pod, n, vec)])
        self._pods_changed((pod_key,))

    @fed
    def forget(self, pod_key: str) -> None:
        """The binding of an assumed pod failed: it is pending again, its room released."""
        if pod_key not in self.assumed:
            return
        pod = self.pods[pod_key]
        self.remove_pod(pod_key)
        self.upsert_pod(_rebound(pod, ""))

    def commit(self, txn: Transaction) -> None:
        """Keep what a session's transaction wrote into the ledger: its placements are
        assumed bindings, its evictions are pods removed (``run_session`` only)."""
        if self._journal is not None:
            self._remember(self._journal, txn)
        for key, _, _ in txn.evicted:
            self.assumed.discard(key)
            self._forget(key, release=False)
        self._assumed(txn.assigned)
        keys = [p.key for p, _, _ in txn.assigned] + [k for k, _, _ in txn.evicted]
        if self._journal is not None:
            self._journal.pods.update(keys)
        source = self.source  # a view: after a fork, the store replays it (``view.py``)
        if source is not None and source.viewing is not None and source.viewing.forked:
            source._kept(txn.assigned, txn.evicted, self.index.node_names, self.extensions)
        txn.commit()
        self._pods_changed(keys)

    # -- dry runs ---------------------------------------------------------------------

    @contextmanager
    def trial(self) -> Iterator[Self]:
        """A dry run: sessions inside the block decide and commit as usual (each gang
        sees the room the ones before it took), and everything they committed, bindings
        and evictions, is undone when it ends (``trial.py``).

        Feed nothing inside the block (its undo log holds the tables). Afterwards objects,
        ledgers and usage are as before; only the event clock moves on: room freed on
        the nodes that took pods, and the gangs involved changed. So a ``Memory`` kept
        across dry runs re-checks what the undone decisions could have changed, and
        skips the rest as it would between real sessions."""
        if self._journal is not None:
            raise RuntimeError("ClusterStore.trial: a trial is already open")
        journal = self._journal = Journal(self.capacity)
        try:
            yield self
        finally:
            self._journal = None
            journal.undo()
            for g in sorted(journal.gangs):
                self._touched(g)
            for n in sorted(journal.placed_on):
                self._freed_on(n)
            self._pods_changed(sorted(journal.pods))

    def _remember(self, journal: Journal, txn: Transaction) -> None:
        """Hand ``journal`` what committing ``txn`` is about to change (see ``commit``,
        ``_forget`` and ``_assumed``): a new table there needs a line here."""
        journal.wrote(txn)
        journal.placed_on.update(n for _, n, _ in txn.assigned)
        journal.gangs.update(self.gang_of.get(p.key) or p.key for p, _, _ in txn.assigned)
        journal.gangs.update(self.gang_of.get(key) or key for key, _, _ in txn.evicted)
        keys = [pod.key for pod, _, _ in txn.assigned]
        gangs = [g for pod, _, _ in txn.assigned if (g := gang_key(pod)) is not None]
        for name in ("priorities", "solo_used", "queue_used", "queue_running", "shape_gpus"):
            journal.keep_whole(self, name)  # small: one entry per priority or queue
        if txn.assigned:
            journal.keep_whole(self, "pending")
        if txn.evicted:
            for name in (
                "pods",
                "node_of",
                "vec_of",
                "gang_of",
                "pending",
                "_holders",
                "_shape_of",
            ):
                journal.keep_whole(self, name)
            journal.keep_whole(self, "members", nested=True)
            keys += [key for key, _, _ in txn.evicted]
            gangs += [g for key, _, _ in txn.evicted if (g := gang_key(self.pods[key]))]
        for name in ("pods", "assumed", "node_of", "vec_of", "_shape_of"):
            journal.keep(self, name, keys)
        for name in ("gang_used", "_holders"):
            journal.keep(self, name, gangs)

    def _fork_assume(self) -> None:
        """Own copies of the tables a view shares (``view.fork``)."""
        self.assumed = set(self.assumed)
