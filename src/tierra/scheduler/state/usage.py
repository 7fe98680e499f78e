"""The store's ledgers: which pods hold room where, and what that adds up to.

The capacity ledger itself (``topology.capacity.Capacity``: used room per node and per
domain) belongs to the index (``topology.py``); these tables say who holds it. A pod
holds room when it is bound (or assumed bound) to a node of the index and not
terminated: ``node_of``/``vec_of`` say where and how much. Summed per gang
(``gang_used``), per queue for pods without a PodGroup (``solo_used``), per queue over
both (``queue_used``, what the queue book starts from), with how many gangs of each
queue hold anything (``queue_running``), the priorities of holding pods (preemption asks
whether anything below a gang runs at all) and the GPUs held per gang shape
(``shape_gpus``, the recent mix the look-ahead keeps room for, ``scoring/mix.py``).

Everything here is rebuilt from the pods when the index is (``_reset_usage`` then
``_hold_all``); otherwise one pod's hold or release is a few array additions, and a
session's kept bindings are held in one go (``_assumed``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from tierra.api.pod import Pod
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.api.podgroup import PodGroup
    from tierra.topology.capacity import Capacity
    from tierra.topology.index import TopologyIndex

QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_QUEUE = "default"
GPU = "nvidia.com/gpu"


def gang_key(pod: Pod) -> str | None:
    """The PodGroup a pod names (``ns/name``), or None for a pod scheduled alone."""
    return f"{pod.namespace}/{pod.group_name}" if pod.group_name else None


# a run of pods ``_hold_all`` adds up at once: one of them, its request vector, its
# shape (``_shape_for``) and the keys of all
_Run = tuple[Pod, IntArray, "tuple[int, int] | None", list[str]]


def solo_queue(pod: Pod) -> str:
    """The queue of a pod without a PodGroup (Volcano's queue annotation, else default)."""
    return pod.meta.annotations.get(QUEUE_ANNOTATION, DEFAULT_QUEUE)


def _rebinder() -> Callable[[Pod, str], Pod]:
    """``replace(pod, node_name=...)`` without re-running ``__init__`` (hot path: every
    pod a session binds). The slots' own setters (a frozen dataclass's ``__setattr__`` is
    closed), one straight line per slot, written out from ``Pod.__slots__`` so a new field
    is copied too: a loop over the slots took 60% longer (3.7 against 2.3 us a pod)."""
    kept = [name for name in Pod.__slots__ if name != "node_name"]
    env: dict[str, object] = {"new": object.__new__, "Pod": Pod}
    env.update({f"set_{name}": getattr(Pod, name).__set__ for name in Pod.__slots__})
    lines = ["def rebound(pod, node_name):", "    clone = new(Pod)"]
    lines += [f"    set_{name}(clone, pod.{name})" for name in kept]
    lines += ["    set_node_name(clone, node_name)", "    return clone"]
    exec("\n".join(lines), env)  # our own text, made from the slot names
    return cast("Callable[[Pod, str], Pod]", env["rebound"])


_rebound = _rebinder()


class Ledgers:
    """The usage part of ``ClusterStore`` (see the module docstring)."""

    node_of: dict[str, int]  # pods holding resources on a known node
    vec_of: dict[str, IntArray]  # ... and what they hold
    gang_used: dict[str, IntArray]  # gang key -> resources its pods hold
    solo_used: dict[str, IntArray]  # queue -> resources held by lone pods
    queue_used: dict[str, IntArray]  # queue -> what its own pods hold
    queue_running: Counter[str]  # queue -> its gangs holding resources
    _holders: Counter[str]  # gang key -> its pods holding resources
    priorities: Counter[int]  # priorities of pods holding resources
    # GPUs held per gang shape (pods in the gang, GPUs per pod): the recent mix the
    # look-ahead keeps room for (``mix.py``); the shape each holding pod counted under
    shape_gpus: Counter[tuple[int, int]]
    _shape_of: dict[str, tuple[int, int]]

    if TYPE_CHECKING:  # held by the other parts of the store
        index: TopologyIndex
        capacity: Capacity
        podgroups: dict[str, PodGroup]
        pods: dict[str, Pod]
        pending: dict[str, None]
        assumed: set[str]
        gang_of: dict[str, str | None]
        _stale: bool

        def _pods_changed(self, keys: Iterable[str]) -> None: ...
        def _touched(self, gang: str) -> None: ...

    def _init_usage(self) -> None:
        self.node_of = {}
        self.vec_of = {}
        self.gang_used = {}
        self.solo_used = {}
        self.queue_used = {}
        self.queue_running = Counter()
        self._holders = Counter()
        self.priorities = Counter()
        self.shape_gpus = Counter()
        self._shape_of = {}

    def _reset_usage(self) -> None:
        """Empty every ledger (the index is rebuilt: node numbers changed)."""
        self.node_of.clear()
        self.vec_of.clear()
        self.gang_used.clear()
        self.solo_used.clear()
        self.queue_used.clear()
        self.queue_running.clear()
        self._holders.clear()
        self.priorities.clear()
        self.shape_gpus.clear()
        self._shape_of.clear()

    def _fork_usage(self) -> None:
        """Own copies of the tables a view shares (``view.fork``)."""
        for name in ("node_of", "vec_of", "gang_used", "solo_used", "queue_used", "_shape_of"):
            setattr(self, name, dict(getattr(self, name)))
        for name in ("queue_running", "_holders", "priorities", "shape_gpus"):
            setattr(self, name, Counter(getattr(self, name)))

    def request_vector(self, pod: Pod) -> IntArray:
        """A pod's request on the ledger axis (resources no node offers left out)."""
        axis = self.capacity.axis
        return axis.vector({r: v for r, v in pod.requests.items() if r in axis.index})

    def _hold_all(self, pods: Iterable[tuple[str, Pod]]) -> None:
        """``_hold`` for many pods: one request vector per distinct request (pods of a
        gang share theirs), one scatter-add into the ledger (a snapshot's 65,000 bound
        pods took seconds placed one by one), and the sums per gang, queue and priority
        added once per run of pods that add the same (a million listed pods: a few
        thousand runs, where each pod's own array additions took seconds)."""
        if self._stale:
            return
        node_ix = self.index.node_ix
        vectors: dict[tuple[tuple[str, int], ...], IntArray] = {}
        nodes: list[int] = []
        rows: list[IntArray] = []
        held: list[str] = []  # for the extensions that follow pods
        runs: dict[tuple[int, str | None, str | None, int], _Run] = {}
        for key, pod in pods:
            held.append(key)
            if not pod.holds_resources:
                continue
            n = node_ix.get(pod.node_name)
            if n is None:
                continue
            shape = tuple(pod.requests.items())
            vec = vectors.get(shape)
            if vec is None:
                vec = vectors[shape] = self.request_vector(pod)
            nodes.append(n)
            rows.append(vec)
            self.node_of[key] = n
            self.vec_of[key] = vec
            g = gang_key(pod)
            run = (pod.priority, g, None if g is not None else solo_queue(pod), id(vec))
            if (same := runs.get(run)) is None:
                same = runs[run] = (pod, vec, self._shape_for(g, vec), [])
            same[3].append(key)
            if same[2] is not None:
                self._shape_of[key] = same[2]
        if rows:
            self.capacity.place_all(np.asarray(nodes, dtype=np.int64), np.stack(rows))
        for pod, vec, found, keys in runs.values():
            self._usage_run(pod, vec, found, len(keys))
        self._pods_changed(held)

    def _usage_run(
        self, pod: Pod, vec: IntArray, found: tuple[int, int] | None, count: int
    ) -> None:
        """``_usage(p, vec, +1)`` for ``count`` pods that differ from ``pod`` in nothing
        it reads (priority, gang, solo queue, request); ``found``: their shape."""
        self.priorities[pod.priority] += count
        if found is not None:
            self.shape_gpus[found] += found[1] * count
        g = gang_key(pod)
        book = self.gang_used if g is not None else self.solo_used
        k = g if g is not None else solo_queue(pod)
        delta = vec * count
        cur = book.get(k)
        book[k] = delta if cur is None else cur + delta
        self._queue_add(self.gang_queue(g) if g is not None else k, delta)
        if g is not None:
            self._held(g, count)

    def _hold(self, key: str, pod: Pod) -> None:
        if not pod.holds_resources:
            return
        n = self.index.node_ix.get(pod.node_name)
        if n is None or self._stale:
            return  # bound to a node outside the index: nothing to account (yet)
        vec = self.request_vector(pod)
        self.capacity.place(n, vec)
        self.node_of[key] = n
        self.vec_of[key] = vec
        self._usage(pod, vec, +1)

    def _usage(self, pod: Pod, vec: IntArray, sign: int) -> None:
        """Count a pod's hold (sign +1) or its release (-1) per gang or queue."""
        self.priorities[pod.priority] += sign
        if self.priorities[pod.priority] <= 0:
            del self.priorities[pod.priority]
        g = gang_key(pod)
        self._shape(pod.key, g, vec, sign)
        book = self.gang_used if g is not None else self.solo_used
        k = g if g is not None else solo_queue(pod)
        cur = book.get(k)
        delta = vec if sign > 0 else -vec
        book[k] = delta.copy() if cur is None else cur + delta
        self._queue_add(self.gang_queue(g) if g is not None else k, delta)
        if g is not None:
            self._held(g, sign)

    def gang_queue(self, gang: str) -> str:
        """The queue a gang's pods count toward: its PodGroup's, or default without one."""
        pg = self.podgroups.get(gang)
        return pg.queue if pg is not None else DEFAULT_QUEUE

    def _queue_add(self, queue: str, delta: IntArray) -> None:
        cur = self.queue_used.get(queue)
        self.queue_used[queue] = delta.copy() if cur is None else cur + delta

    def _held(self, gang: str, sign: int) -> None:
        """``sign`` more (or, negative, fewer) of ``gang``'s pods hold resources."""
        before = self._holders[gang]
        after = before + sign
        q = self.gang_queue(gang)
        if before == 0 and after > 0:
            self.queue_running[q] += 1
        elif before > 0 and after == 0:
            self.queue_running[q] -= 1
        if after > 0:
            self._holders[gang] = after
        else:
            del self._holders[gang]

    def _regang(self, gang: str, old: str, new: str) -> None:
        """A gang's pods now count toward queue ``new`` instead of ``old``."""
        if old == new:
            return
        used = self.gang_used.get(gang)
        if used is not None:
            self._queue_add(old, -used)
            self._queue_add(new, used)
        if self._holders[gang] > 0:
            self.queue_running[old] -= 1
            self.queue_running[new] += 1

    def _shape(self, key: str, group: str | None, vec: IntArray, sign: int) -> None:
        """Count a holding pod's GPUs under its gang's shape (``shape_gpus``)."""
        if sign < 0:
            shape = self._shape_of.pop(key, None)
            if shape is not None:
                self.shape_gpus[shape] -= shape[1]
                if self.shape_gpus[shape] <= 0:
                    del self.shape_gpus[shape]
            return
        found = self._shape_for(group, vec)
        if found is not None:
            self._shape_of[key] = found
            self.shape_gpus[found] += found[1]

    def _shape_for(self, group: str | None, vec: IntArray) -> tuple[int, int] | None:
        """The shape a pod of ``group`` asking ``vec`` counts under (None: no GPUs)."""
        g = self.capacity.axis.index.get(GPU)
        gpus = int(vec[g]) // 1000 if g is not None else 0
        if gpus <= 0:
            return None
        pg = self.podgroups.get(group) if group is not None else None
        size = pg.min_member if pg is not None and pg.min_member > 0 else 1
        return (size, gpus)

    def _assumed(self, assigned: Sequence[tuple[Pod, int, IntArray]]) -> None:
        """Record bindings whose resources are already in the ledger.

        Hot (every pod a session binds): each pod gets its own table rows; the pods are
        counted per run (gang or lone pod's queue, request vector, priority: a gang's
        pods share a few) and what is summed per gang, queue, priority and shape is
        added per run, the runs in the order their first pods came (so new keys enter
        the tables in the order they did pod by pod)."""
        names = self.index.node_names
        pods, pending, node_of, vec_of, gang_of = (
            self.pods,
            self.pending,
            self.node_of,
            self.vec_of,
            self.gang_of,
        )
        unpend = pending.pop
        runs: dict[tuple[str | None, str | None, int, int], tuple[IntArray, list[str]]] = {}
        for pod, node, vec in assigned:
            key = pod.key
            g = gang_of[key] if key in gang_of else gang_key(pod)
            pods[key] = _rebound(pod, names[node])
            unpend(key, None)
            node_of[key] = node
            vec_of[key] = vec
            at = (g, None if g is not None else solo_queue(pod), id(vec), pod.priority)
            run = runs.get(at)
            if run is None:
                runs[at] = (vec, [key])
            else:
                run[1].append(key)
        self._assumed_runs(runs)

    def _assumed_runs(
        self, runs: dict[tuple[str | None, str | None, int, int], tuple[IntArray, list[str]]]
    ) -> None:
        """``_assumed``'s sums, per run of alike pods (see there). Plain dicts, not
        Counters: a lone pod is committed alone, one run, thousands a session."""
        priorities: dict[int, int] = {}
        shapes: dict[tuple[str | None, int], tuple[int, int] | None] = {}
        shape_gpus: dict[tuple[int, int], int] = {}
        holding: dict[str, int] = {}  # gang -> its pods bound here
        per_slot: dict[tuple[bool, str], dict[int, tuple[IntArray, int]]] = {}  # slot -> runs
        touched: set[str] = set()
        shape_of = self._shape_of
        for (g, queue, vid, prio), (vec, keys) in runs.items():
            n = len(keys)
            self.assumed.update(keys)
            if g is None:
                touched.update(keys)
            else:
                touched.add(g)
                holding[g] = holding.get(g, 0) + n
            priorities[prio] = priorities.get(prio, 0) + n
            at = (g, vid)
            shape = shapes[at] if at in shapes else shapes.setdefault(at, self._shape_for(g, vec))
            if shape is not None:
                shape_of.update(dict.fromkeys(keys, shape))
                shape_gpus[shape] = shape_gpus.get(shape, 0) + shape[1] * n
            slot = (True, g) if g is not None else (False, cast(str, queue))
            slot_runs = per_slot.setdefault(slot, {})
            had = slot_runs.get(vid)
            slot_runs[vid] = (vec, n) if had is None else (vec, had[1] + n)
        for prio, count in priorities.items():
            self.priorities[prio] += count
        for shape, gpus in shape_gpus.items():
            self.shape_gpus[shape] += gpus
        for g, count in holding.items():
            self._held(g, count)
        for (is_gang, k), slot_runs in per_slot.items():
            total: IntArray | None = None
            for v, n in slot_runs.values():
                total = v * n if total is None else total + v * n
            assert total is not None
            book = self.gang_used if is_gang else self.solo_used
            cur = book.get(k)
            book[k] = total if cur is None else cur + total
            self._queue_add(self.gang_queue(k) if is_gang else k, total)
        for g in sorted(touched):
            self._touched(g)

    def running_priorities(self) -> list[int]:
        return list(self.priorities)
