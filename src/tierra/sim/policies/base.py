"""What a placement policy is to the simulator, and the ledger the baselines share.

The event loop talks to every policy, tierra's real scheduler and the baselines alike,
through ``SimPolicy``: it hands over jobs as they arrive, tells it when a job ends or a node
changes, and asks for one scheduling session at a time. The loop keeps its own ledger
and checks every placement against it, so a policy can never over-commit unnoticed.

``LedgerPolicy`` is the shared base of the baselines: a ``Capacity`` ledger kept in step
with the loop, the session order every baseline uses (priority, then arrival, then
name; a gang that does not fit is skipped, not waited for), and helpers that fill nodes.
A subclass only decides where one gang goes (``place``). On a cluster with devices
(``sim/devices.py``) every baseline then takes each pod's devices as kube-scheduler's
allocator does for claims without constraints: the first free ones in pool order.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from tierra.api.node import Node
from tierra.sim.clusters import SimCluster
from tierra.sim.cost import BoundCost
from tierra.sim.devices import FirstFree, claims_nics
from tierra.sim.workloads import SimJob
from tierra.topology.arrays import fit_counts
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray, TopologyIndex

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where each pod of one job goes: node indices in ``job.layout()`` order; on a
    cluster with devices (``sim/devices.py``), each pod's device names too."""

    job: str
    nodes: tuple[int, ...]
    devices: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue as a policy that keeps queues sees it after a session."""

    deserved_gpus: float
    pending: int  # gangs waiting
    running: int  # gangs holding GPUs


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    placements: list[Placement] = field(default_factory=list)
    evictions: list[str] = field(default_factory=list)  # jobs whose pods were evicted
    notes: dict[str, str] = field(default_factory=dict)  # job -> why it waits (optional)
    queues: dict[str, QueueShare] = field(default_factory=dict)  # optional: queue -> state


class PolicyUnavailable(Exception):
    """The policy cannot run here (tierra's scheduler not importable yet)."""


class SimPolicy(Protocol):
    """One placement policy, driven by the event loop.

    Calls arrive in simulated-time order: ``start`` once, then any mix of ``submit``
    (a job is pending), ``release`` (a running job ended or was killed: free its pods),
    ``node_changed`` (a node failed or recovered) and ``session`` (decide now, at
    simulated time ``now``). A placement returned by ``session`` is committed: the policy
    must count it as running.
    """

    name: str

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None: ...

    def submit(self, job: SimJob) -> None: ...

    def release(self, job: SimJob) -> None: ...

    def node_changed(self, node: Node) -> None: ...

    def session(self, now: float) -> SessionOutcome: ...


# -- the shared ledger --------------------------------------------------------------------


@dataclass(slots=True)
class Gang:
    """A job as vectors: one request per pod (``layout`` order) and per role."""

    job: SimJob
    pod_vecs: list[IntArray]
    pod_roles: list[int]
    pod_parts: list[int]
    role_vecs: list[IntArray]
    total: IntArray
    widest: IntArray  # element-wise max over pods: a conservative single shape

    @classmethod
    def of(cls, job: SimJob, capacity: Capacity) -> Gang:
        role_vecs = [_vector(capacity, r.request()) for r in job.roles]
        layout = job.layout()
        pod_vecs = [role_vecs[r] for r, _ in layout]
        total = np.sum(pod_vecs, axis=0).astype(np.int64)
        widest = np.max(pod_vecs, axis=0).astype(np.int64)
        return cls(
            job=job,
            pod_vecs=pod_vecs,
            pod_roles=[r for r, _ in layout],
            pod_parts=[p for _, p in layout],
            role_vecs=role_vecs,
            total=total,
            widest=widest,
        )

    @property
    def uniform(self) -> bool:
        return all(np.array_equal(v, self.role_vecs[0]) for v in self.role_vecs[1:])


def _vector(capacity: Capacity, request: dict[str, int]) -> IntArray:
    """A request in ledger units; a resource no node offers makes it unplaceable."""
    axis = capacity.axis
    if axis.missing(request):
        return np.full(len(axis), np.iinfo(np.int64).max // 4, dtype=np.int64)
    return axis.vector(request)


def background(cluster: SimCluster, capacity: Capacity) -> list[tuple[int, IntArray]]:
    """Pods already running in a loaded snapshot: they hold their nodes for the whole run."""
    out = []
    for pod in cluster.extra.pods:
        n = cluster.index.node_ix.get(pod.node_name)
        if pod.holds_resources and n is not None and not capacity.axis.missing(pod.requests):
            out.append((n, capacity.axis.vector(pod.requests)))
    return out


class LedgerPolicy(abc.ABC):
    """Base of the baselines: a capacity ledger, a pending list, one gang at a time."""

    name = "ledger"

    def __init__(self) -> None:
        self.pending: dict[str, SimJob] = {}
        self.running: dict[str, tuple[list[int], list[IntArray]]] = {}
        self._gangs: dict[str, Gang] = {}
        self._failed_at: dict[str, int] = {}
        self._freed = 0  # bumps whenever capacity comes back; a failed gang retries then
        self._devices: dict[str, list[tuple[str, ...]]] = {}  # job -> each pod's devices
        self.first_free: FirstFree | None = None

    # -- SimPolicy ------------------------------------------------------------------------

    def start(self, cluster: SimCluster, *, seed: int, cost: BoundCost) -> None:
        del cost  # the baselines know tiers, not link rates (as Kueue and Volcano do)
        self.cluster = cluster
        self.index: TopologyIndex = cluster.index
        self.capacity = Capacity(self.index, cluster.nodes)
        for n, vec in background(cluster, self.capacity):
            self.capacity.place(n, vec)
        self.healthy: BoolArray = np.ones(len(self.index.node_names), dtype=bool)
        for node in cluster.nodes:
            self.healthy[self.index.node_ix[node.name]] = node.ready and not node.unschedulable
        self.rng = np.random.default_rng(seed)
        self.first_free = FirstFree(cluster.devices) if cluster.devices is not None else None
        self.prepare()

    def prepare(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Precompute what ``place`` needs (called once, after the ledger exists)."""

    def submit(self, job: SimJob) -> None:
        self.pending[job.name] = job

    def release(self, job: SimJob) -> None:
        self.pending.pop(job.name, None)
        held = self.running.pop(job.name, None)
        if held is not None:
            for n, vec in zip(*held, strict=True):
                self.capacity.remove(n, vec)
            self._freed += 1
        taken = self._devices.pop(job.name, ())
        if self.first_free is not None:
            for n, names in zip(held[0] if held else (), taken, strict=False):
                self.first_free.give_back(self.index.node_names[n], names)

    def node_changed(self, node: Node) -> None:
        n = self.index.node_ix[node.name]
        ok = node.ready and not node.unschedulable
        if ok and not self.healthy[n]:
            self._freed += 1
        self.healthy[n] = ok

    def session(self, now: float) -> SessionOutcome:
        del now  # the ledger policies place first come, first served: no clock needed
        out = SessionOutcome()
        order = sorted(self.pending.values(), key=lambda j: (-j.priority, j.arrival, j.name))
        for job in order:
            if self._failed_at.get(job.name) == self._freed:
                continue  # nothing came free since it last failed: it cannot fit now
            gang = self.gang(job)
            nodes = self.place(gang) if self._enough(gang) else None
            devices = self._take_devices(gang, nodes) if nodes is not None else None
            if nodes is None or devices is None:
                self._failed_at[job.name] = self._freed
                continue
            for n, vec in zip(nodes, gang.pod_vecs, strict=True):
                self.capacity.place(n, vec)
            self.running[job.name] = (list(nodes), gang.pod_vecs)
            del self.pending[job.name]
            self._failed_at.pop(job.name, None)
            out.placements.append(Placement(job.name, tuple(nodes), devices))
        return out

    def _take_devices(self, gang: Gang, nodes: Sequence[int]) -> tuple[tuple[str, ...], ...] | None:
        """Each pod's devices, as kube-scheduler's allocator picks them (``FirstFree``);
        None (and nothing taken) when a node has too few. Nothing to take without devices."""
        if self.first_free is None:
            return ()
        nics = claims_nics(gang.job.pods)
        out: list[tuple[str, ...]] = []
        for n, r in zip(nodes, gang.pod_roles, strict=True):
            gpus = gang.job.roles[r].gpus
            got = self.first_free.take(self.index.node_names[n], gpus, gpus if nics else 0)
            if got is None:
                for m, names in zip(nodes, out, strict=False):
                    self.first_free.give_back(self.index.node_names[m], names)
                return None
            out.append(got)
        self._devices[gang.job.name] = out
        return tuple(out)

    # -- for subclasses ----------------------------------------------------------------

    @abc.abstractmethod
    def place(self, gang: Gang) -> list[int] | None:
        """Node index for every pod of ``gang`` (``layout`` order), or None to skip it."""

    def gang(self, job: SimJob) -> Gang:
        g = self._gangs.get(job.name)
        if g is None or g.job is not job:
            g = self._gangs[job.name] = Gang.of(job, self.capacity)
        return g

    def free(self) -> IntArray:
        """Free amounts per node; unhealthy nodes offer nothing."""
        free = self.capacity.node_free()
        free[~self.healthy] = 0
        return free

    def _enough(self, gang: Gang) -> bool:
        free = self.capacity.node_free()[self.healthy].sum(axis=0)
        return bool((free >= gang.total).all())

    def fill_roles(self, gang: Gang, order: Sequence[int] | IntArray) -> list[int] | None:
        """Pods role by role onto nodes in ``order``, each node as full as it goes."""
        free = self.free()
        by_role: list[list[int]] = []
        for r, vec in enumerate(gang.role_vecs):
            want = gang.job.roles[r].pods
            picked = fill(free, vec, want, order)
            if picked is None:
                return None
            by_role.append(picked)
            for n in picked:
                free[n] -= vec
        return assign_roles(gang, by_role)


def fill(
    free: IntArray, request: IntArray, count: int, order: Sequence[int] | IntArray
) -> list[int] | None:
    """``count`` pods onto nodes taken in ``order``, each filled before the next."""
    order_arr = np.asarray(order, dtype=np.int64)
    if count == 0:
        return []
    if not len(order_arr):
        return None
    fits = fit_counts(free[order_arr], request)
    cum = np.cumsum(fits)
    if cum[-1] < count:
        return None
    last = int(np.searchsorted(cum, count))
    out: list[int] = []
    for i in range(last + 1):
        take = int(fits[i]) if i < last else count - (int(cum[i - 1]) if i else 0)
        out.extend([int(order_arr[i])] * take)
    return out


def assign_roles(gang: Gang, by_role: list[list[int]]) -> list[int]:
    """Per-role node lists back into pod (``layout``) order."""
    cursor = [0] * len(by_role)
    out = []
    for r in gang.pod_roles:
        out.append(by_role[r][cursor[r]])
        cursor[r] += 1
    return out


if TYPE_CHECKING:

    class _Check(LedgerPolicy):
        def place(self, gang: Gang) -> list[int] | None:
            return None

    _: SimPolicy = _Check()
