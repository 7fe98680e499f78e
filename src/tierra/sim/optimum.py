"""The exact optimum for placing one gang, by integer programming (HiGHS via scipy).

Why: "better than the baselines" says nothing about how far from the best anyone is.
For one gang on the cluster as it stands, this finds the placement of least
communication cost, where every node and every HyperNode the gang touches costs its
weight: ``best bandwidth / the domain's effective bandwidth`` from the cost model (a node
costs 1 on an NVLink node, a leaf ~9, an oversubscribed core ~60). That is the
domain-level cost of Fluidstack's scheduler write-up (Σ over levels of domains spanned
x level weight [FLUID]); minimising it prefers fewer nodes, then fewer leaves, and
above all a lower top tier.

    minimise   Σ_n w_n y_n + Σ_d w_d z_d
    subject to Σ_n x_sn = count_s                  every pod of shape s placed
               Σ_s req_sr x_sn <= free_nr          (when shapes differ)
               Σ_s x_sn <= M_n y_n                 a node used is paid for
               y_n <= z_d   for every d ∋ n        and so is every domain above it
               x_sn ∈ {0..fit_sn}, y, z ∈ {0, 1}

The virtual root is always touched and costs nothing. Sub-group and hard-tier
constraints are left out, so the optimum is a lower bound for any policy that must honour
them: gaps are never understated. Meant for small clusters (hundreds of nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp  # type: ignore[import-untyped]
from scipy.sparse import coo_array  # type: ignore[import-untyped]

from tierra.sim._topo import FloatArray, TopoArrays
from tierra.sim.cost import BoundCost
from tierra.sim.policies.base import Gang
from tierra.topology.arrays import fit_counts
from tierra.topology.index import IntArray


@dataclass(frozen=True, slots=True)
class DomainWeights:
    node: FloatArray  # cost of touching each node
    domain: FloatArray  # cost of touching each domain (the virtual root: 0)

    @classmethod
    def of(cls, cost: BoundCost) -> DomainWeights:
        ref = float(max(cost.node_gbps.max(initial=1.0), cost.domain_gbps.max(initial=1.0)))
        node = ref / np.maximum(cost.node_gbps, 1e-9)
        domain = ref / np.maximum(cost.domain_gbps, 1e-9)
        domain[cost.index.root] = 0.0
        return cls(node=node, domain=domain)


@dataclass(frozen=True, slots=True)
class Optimum:
    cost: float
    nodes: tuple[int, ...]  # node of every pod, in the gang's layout order
    status: str


def placement_cost(topo: TopoArrays, nodes: Sequence[int], weights: DomainWeights) -> float:
    """What a placement costs under the same weights the optimum minimises."""
    distinct = np.unique(np.asarray(nodes, dtype=np.int64))
    domains = np.unique(np.concatenate([topo.index.domains_of(int(n)) for n in distinct]))
    return float(weights.node[distinct].sum() + weights.domain[domains].sum())


def _shapes(gang: Gang) -> tuple[list[IntArray], list[int], list[int]]:
    """The distinct pod shapes of ``gang``, each role's shape, and the pods per shape: the
    model has one variable per (shape, node), not per role."""
    shapes: list[IntArray] = []
    shape_of_role: list[int] = []
    for vec in gang.role_vecs:
        for s, known in enumerate(shapes):
            if np.array_equal(known, vec):
                shape_of_role.append(s)
                break
        else:
            shape_of_role.append(len(shapes))
            shapes.append(vec)
    counts = [0] * len(shapes)
    for r, role in enumerate(gang.job.roles):
        counts[shape_of_role[r]] += role.pods
    return shapes, shape_of_role, counts


def _pod_nodes(x: IntArray, cand: IntArray, gang: Gang, shape_of_role: Sequence[int]) -> list[int]:
    """The solution's pods per (shape, node) handed out to the gang's pods in order."""
    n_s, n_c = x.shape
    per_shape: list[list[int]] = [
        [int(cand[j]) for j in range(n_c) for _ in range(int(x[s, j]))] for s in range(n_s)
    ]
    cursor = [0] * n_s
    nodes: list[int] = []
    for r in gang.pod_roles:
        s = shape_of_role[r]
        nodes.append(per_shape[s][cursor[s]])
        cursor[s] += 1
    return nodes


def optimal_cost(
    topo: TopoArrays,
    free: IntArray,
    gang: Gang,
    weights: DomainWeights,
    *,
    time_limit: float = 20.0,
) -> Optimum | None:
    """The least-cost placement of ``gang`` on ``free`` (None when it does not fit)."""
    shapes, shape_of_role, counts = _shapes(gang)
    fits = np.stack([fit_counts(free, v) for v in shapes])  # [shapes, nodes]
    cand = np.flatnonzero(fits.sum(axis=0) > 0)
    if any(int(fits[s, cand].sum()) < c for s, c in enumerate(counts)):
        return None
    index = topo.index
    doms = sorted({int(d) for n in cand for d in index.domains_of(int(n)) if d != index.root})
    dpos = {d: i for i, d in enumerate(doms)}
    n_s, n_c, n_d = len(shapes), len(cand), len(doms)
    nx = n_s * n_c
    ny0, nz0 = nx, nx + n_c
    nvar = nz0 + n_d
    c = np.zeros(nvar)
    c[ny0:nz0] = weights.node[cand]
    c[nz0:] = weights.domain[doms]
    lb = np.zeros(nvar)
    ub = np.ones(nvar)
    ub[:nx] = fits[:, cand].reshape(-1)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        r = len(lo)
        for col, v in entries:
            rows.append(r)
            cols.append(col)
            vals.append(v)
        lo.append(low)
        hi.append(high)

    for s in range(n_s):  # every pod placed
        row([(s * n_c + j, 1.0) for j in range(n_c)], counts[s], counts[s])
    if n_s > 1:  # shapes share a node's resources
        for j, n in enumerate(cand):
            for res in np.flatnonzero(np.stack(shapes).sum(axis=0) > 0).tolist():
                cap = float(free[n, res])
                if cap <= 0:
                    continue
                row([(s * n_c + j, float(shapes[s][res]) / cap) for s in range(n_s)], -np.inf, 1.0)
    big = fits[:, cand].sum(axis=0)
    for j, n in enumerate(cand):  # a node used is paid for, and every domain above it
        row([*((s * n_c + j, 1.0) for s in range(n_s)), (ny0 + j, -float(big[j]))], -np.inf, 0.0)
        for d in index.domains_of(int(n)):
            if int(d) != index.root:
                row([(ny0 + j, 1.0), (nz0 + dpos[int(d)], -1.0)], -np.inf, 0.0)
    a = coo_array((vals, (rows, cols)), shape=(len(lo), nvar)).tocsr()
    res = milp(
        c,
        integrality=np.ones(nvar),
        bounds=Bounds(lb, ub),
        constraints=[LinearConstraint(a, np.array(lo), np.array(hi))],
        options={"time_limit": time_limit, "disp": False},
    )
    if res.x is None:
        return None
    x = np.rint(res.x[:nx]).astype(np.int64).reshape(n_s, n_c)
    nodes = _pod_nodes(x, cand, gang, shape_of_role)
    status = "optimal" if res.status == 0 else str(res.message)
    return Optimum(cost=placement_cost(topo, nodes, weights), nodes=tuple(nodes), status=status)
