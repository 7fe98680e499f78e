"""Contention: jobs whose traffic shares an oversubscribed uplink slow each other.

The cost model charges a job the bandwidth of the slowest tier it spans as if it had
the fabric to itself. On an oversubscribed tier that is not so: a ToR with 64 GPUs
below a 2:1 aggregation layer has uplinks for 32 GPUs' worth of line rate, and every
job with pods under that ToR and pods elsewhere pushes its traffic through them. Crux
measured it on a production cluster: a 64-GPU GPT job under two ToRs ran 1.53 s per
iteration alone and 1.70 s (+11%) beside a 16-GPU BERT job under the same ToRs; 36.3%
of jobs (51% of GPUs) there were at risk of such contention [CRUX]. Meta's fabric
keeps an aggregation layer at 1:7 [L3-SUM], Alibaba's aggregation-core at 15:1 [HPN].

The model, per uplink (a domain or node ``x`` into its parent ``p``):

* capacity, in GPUs at line rate: ``GPUs under x / oversubscription(p)``;
* a job crosses ``x``'s uplink when it has pods inside ``x`` and outside it; its own
  load is its GPUs inside ``x``. Another job's load counts weighted by its
  communication share (the chance its collective runs at the same moment, phases taken
  as independent), so ``load_j(x) = own_j(x) + sum_{k != j} own_k(x) * comm_k``;
* the job's bandwidth through ``x`` is ``B_p * min(1, capacity / load)``, and through
  its whole path the lowest of those. Alone it gets ``B_alone`` (own load only), beside
  others ``B_shared``; the cost model's span bandwidth shrinks by ``B_alone / B_shared``,
  so a job that shares nothing runs exactly as the cost model says.

With Crux's pair on the fat tree's ToRs (64 GPUs, 2:1 above): GPT's 32 GPUs per ToR
alone fill the uplinks exactly (no slowdown); BERT's 8 GPUs per ToR (2 hosts of 4)
add 8 x 0.45 = 3.6, so GPT's communication stretches by 35.6 / 32 = 1.11 and, at a
comm share of 0.45, its iteration by 7% -- Crux measured 11%; the fluid sharing here has
no ECMP collisions, which Crux names as the main cause
(``tests/sim/test_sim_published_figures.py`` runs the case). A non-blocking fabric (SuperPOD:
every tier 1:1) has capacity for every GPU below each uplink, so the load never
exceeds it and nothing changes. A tier's oversubscription comes from the cost model
(``oversubscription`` of the parent's tier).

``LinkLoads`` keeps the load of every oversubscribed uplink as jobs start and end and
says which running jobs a change touches, so the event loop re-times only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tierra.sim.cost import BoundCost, FloatArray

Uplink = int  # a domain index, or ``-1 - n`` for node n's own uplink


@dataclass(frozen=True, slots=True)
class Crossing:
    """One uplink a job's traffic goes through, and the job's GPUs below it."""

    uplink: Uplink
    gpus: float
    capacity: float  # GPUs at line rate the uplink carries
    gbps: float  # line rate per GPU at the parent's tier


class LinkLoads:
    """Weighted load on every oversubscribed uplink, updated as jobs start and end."""

    def __init__(self, cost: BoundCost, node_gpus: Sequence[float] | FloatArray) -> None:
        self.cost = cost
        index = cost.index
        self.index = index
        self.node_gpus = np.asarray(node_gpus, dtype=np.float64)
        self.domain_gpus = np.zeros(index.root + 1, dtype=np.float64)
        for h in range(index.root + 1):
            nodes = index.real_nodes[h] if h < index.root else np.arange(len(index.node_names))
            self.domain_gpus[h] = float(self.node_gpus[nodes].sum())
        self.load: dict[Uplink, float] = {}
        self.jobs_on: dict[Uplink, set[str]] = {}
        self.crossing: dict[str, tuple[Crossing, ...]] = {}
        self.comm: dict[str, float] = {}

    # -- which uplinks a placement crosses ----------------------------------------------

    def _parent_chain(self, node: int, top: int) -> list[int]:
        """Domains strictly below ``top`` holding ``node``, lowest first, ending at ``top``."""
        index = self.index
        for leaf in index.leaf_idx[index.leaf_ptr[node] : index.leaf_ptr[node + 1]].tolist():
            chain = index.ancestors(int(leaf))
            if top in chain:
                return chain[: chain.index(top) + 1]
        return [top]  # a node outside every HyperNode: straight into the root

    def crossings(
        self, nodes: Iterable[int], gpus: Mapping[int, float], top: int
    ) -> list[Crossing]:
        """Oversubscribed uplinks a job on ``nodes`` (GPUs per node) spanning ``top`` crosses."""
        if top < 0:
            return []  # one node: NVLink inside it
        over = self.cost.domain_oversubscription
        raw = self.cost.domain_raw_gbps
        below: dict[Uplink, float] = {}
        parent: dict[Uplink, int] = {}
        for n in sorted(set(nodes)):
            chain = self._parent_chain(n, top)
            g = float(gpus.get(n, 0.0))
            links: list[tuple[Uplink, int]] = [(-1 - n, chain[0])]
            links += [(chain[i], chain[i + 1]) for i in range(len(chain) - 1)]
            for x, p in links:
                if over[p] > 1.0:
                    below[x] = below.get(x, 0.0) + g
                    parent[x] = p
        out = []
        for x, g in sorted(below.items()):
            if g <= 0:
                continue
            size = self.node_gpus[-1 - x] if x < 0 else self.domain_gpus[x]
            p = parent[x]
            out.append(Crossing(x, g, float(size / over[p]), float(raw[p])))
        return out

    # -- the ledger ---------------------------------------------------------------------

    def add(self, job: str, crossings: Sequence[Crossing], comm_share: float) -> set[str]:
        """A job starts; returns the other running jobs whose bandwidth may change."""
        self.crossing[job] = tuple(crossings)
        self.comm[job] = comm_share
        touched: set[str] = set()
        for c in crossings:
            self.load[c.uplink] = self.load.get(c.uplink, 0.0) + c.gpus * comm_share
            users = self.jobs_on.setdefault(c.uplink, set())
            touched |= users
            users.add(job)
        return touched

    def remove(self, job: str) -> set[str]:
        """A job ends or is killed; returns the running jobs whose bandwidth may change."""
        crossings = self.crossing.pop(job, ())
        share = self.comm.pop(job, 0.0)
        touched: set[str] = set()
        for c in crossings:
            self.load[c.uplink] -= c.gpus * share
            users = self.jobs_on[c.uplink]
            users.discard(job)
            touched |= users
            if not users:
                del self.jobs_on[c.uplink]
                del self.load[c.uplink]
        return touched

    def stretch(self, job: str) -> float:
        """``B_alone / B_shared`` for a running job: 1.0 when it shares no busy uplink."""
        crossings = self.crossing.get(job, ())
        if not crossings:
            return 1.0
        mine = self.comm.get(job, 0.0)
        alone = shared = float("inf")
        for c in crossings:
            others = self.load[c.uplink] - c.gpus * mine
            alone = min(alone, c.gbps * min(1.0, c.capacity / c.gpus))
            shared = min(shared, c.gbps * min(1.0, c.capacity / (c.gpus + max(others, 0.0))))
        return alone / shared if shared > 0 else 1.0
