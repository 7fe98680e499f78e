"""The contract every scoring policy implements, and the read-only view it scores over.

A policy turns "which domain?" and "which node?" into numbers in ``[0, 1]`` (higher is
better). The session multiplies each by the policy's weight from the configuration and
adds them up; ties then break by lower tier, then name. Policies never mutate the
cluster state and never see Kubernetes objects: only the index, the capacity ledgers and
the per-tier layouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.links import LinkCosts
from tierra.scheduler.scoring.mix import ShapeShare
from tierra.scheduler.state.layout import Layouts
from tierra.topology.arrays import FloatArray
from tierra.topology.capacity import Capacity
from tierra.topology.index import IntArray, TopologyIndex


@dataclass(frozen=True, slots=True)
class View:
    """What a policy may read. ``capacity`` is live: scores reflect pods placed so far.

    A session adds what it knows beyond the cache: the link rates it ranks by (``links``)
    and the recent mix of gang shapes (``mix``, for the look-ahead)."""

    index: TopologyIndex
    capacity: Capacity
    layouts: Layouts
    links: LinkCosts | None = None
    mix: tuple[ShapeShare, ...] = ()


class Policy(Protocol):
    """A scoring policy. Both methods are pure and vectorised over their inputs."""

    @property
    def name(self) -> str: ...

    @property
    def packs(self) -> bool:
        """True when adding a pod to a node never lowers that node's own score, so node
        choice may fill the best node before scoring again."""
        ...

    def domain_scores(
        self, view: View, request: IntArray, domains: IntArray, allocated: int | None
    ) -> FloatArray:
        """Score candidate ``domains`` for holding ``request`` (the whole gang or
        sub-group, running pods included); ``allocated`` is where its running pods are."""
        ...

    def node_scores(
        self, view: View, request: IntArray, nodes: IntArray, region: int, allocated: int | None
    ) -> FloatArray:
        """Score ``nodes`` for one pod of ``request`` placed inside ``region``. Domains
        holding all of ``region`` change every node alike and must be ignored, so a
        caller may rescore only the nodes whose domains changed."""
        ...


def fill_after(
    alloc: IntArray, used: IntArray, request: IntArray, weights: FloatArray
) -> FloatArray:
    """Volcano's weighted binpack: ``sum w*(used+req)/alloc / sum w``, 0 when over.

    Rows are domains (or nodes); only resources with a weight and some allocatable
    count. A row that cannot take ``request`` at all scores 0. A row's score never
    depends on the rows asked with it: the weighted sums add the columns one by one,
    left to right (a matrix product's order of additions changes with the number of
    rows: one row alone came out one bit apart), so the flat path's kept scores and
    fills, refreshed a row at a time, equal scores from scratch. (Hot: the flat path
    calls it for every pod, on a few rows; resources without a weight add exact zeros,
    so they are skipped.)
    """
    if len(alloc) == 0:
        return np.zeros(0, dtype=np.float64)
    after = used + request
    positive = alloc > 0
    frac = np.divide(after, alloc, out=np.zeros(after.shape), where=positive)
    num = np.zeros(len(frac), dtype=np.float64)
    den = np.zeros(len(frac), dtype=np.float64)
    for j in np.flatnonzero(weights).tolist():
        w = weights[j]
        num += frac[:, j] * w
        den += np.where(positive[:, j], w, 0.0)
    asked = (weights > 0) & (request > 0)
    over = (after[:, asked] > alloc[:, asked]).any(axis=1)
    score: FloatArray = np.divide(num, den, out=np.zeros(len(num)), where=den > 0)
    np.minimum(score, 1.0, out=score)
    score[over] = 0.0
    return score


FillTerms = tuple[list[tuple[int, float, int]], list[tuple[int, int]]]


def fill_terms(request: IntArray, weights: FloatArray) -> FillTerms:
    """What ``fill_row`` reads of a request and weights: the weighted columns (index,
    weight, amount asked) and the asked ones (index, amount) that must fit."""
    req = request.tolist()
    cols = [(j, float(w), req[j]) for j, w in enumerate(weights.tolist()) if w]
    return cols, [(j, r) for j, w, r in cols if w > 0 and r > 0]


def fill_row(alloc: list[int], used: list[int], terms: FillTerms) -> float:
    """``fill_after`` of one row, in Python floats: the same IEEE operations in the same
    order (each amount converted to a float, divided, weighted and added column by
    column), so the same value, without a dozen array calls. The flat path refreshes a
    placed node's fill and its domains' this way after every lone pod."""
    cols, asked = terms
    for j, r in asked:
        if used[j] + r > alloc[j]:
            return 0.0
    num = den = 0.0
    for j, w, r in cols:
        a = alloc[j]
        if a > 0:
            num += float(used[j] + r) / float(a) * w
            den += w
    return min(num / den, 1.0) if den > 0 else 0.0


def fill_rows(
    alloc: IntArray, used: IntArray, request: IntArray, weights: FloatArray
) -> list[float]:
    """``fill_row`` of each row (``fill_after`` for a few rows)."""
    terms = fill_terms(request, weights)
    return [fill_row(a, u, terms) for a, u in zip(alloc.tolist(), used.tolist(), strict=True)]


def resource_weights(
    names: tuple[str, ...], configured: dict[str, float], default: float = 1.0
) -> FloatArray:
    """A weight per resource of the axis: configured ones as given, ``pods`` 0, others
    ``default``."""
    return np.array(
        [configured.get(n, 0.0 if n == "pods" else default) for n in names], dtype=np.float64
    )


_WEIGHTS: dict[tuple[tuple[str, ...], tuple[tuple[str, float], ...]], FloatArray] = {}


def weights_for(names: tuple[str, ...], configured: tuple[tuple[str, float], ...]) -> FloatArray:
    """``resource_weights`` kept per axis and configuration (the flat path asks for every
    pod it places); read-only, shared."""
    key = (names, configured)
    found = _WEIGHTS.get(key)
    if found is None:
        if len(_WEIGHTS) > 64:  # axes and configurations come and go: keep a few
            _WEIGHTS.clear()
        found = _WEIGHTS[key] = resource_weights(names, dict(configured))
        found.setflags(write=False)
    return found


def reject_unknown(data: dict[str, object] | object, allowed: tuple[str, ...]) -> list[str]:
    """The keys of ``data`` that are not in ``allowed`` (typos must not pass silently)."""
    if not isinstance(data, dict):
        return []
    return [str(k) for k in data if k not in allowed]


def parse_resource_weights(
    f: Fields, name: str, allowed: tuple[str, ...]
) -> tuple[tuple[str, float], ...]:
    """Check a policy's arguments for typos and read its ``resources`` weights (>= 0)."""
    for key in reject_unknown(dict(f.data), allowed):
        f.problem(key, f"unknown argument of policy {name}; known: {', '.join(allowed[1:])}")
    res = f.obj("resources")
    weights: list[tuple[str, float]] = []
    for resource in res.data:
        value = res.number(str(resource))
        if value is None:
            continue
        if value < 0:
            res.problem(str(resource), f"must be >= 0, got {value}")
            continue
        weights.append((str(resource), value))
    return tuple(sorted(weights))
