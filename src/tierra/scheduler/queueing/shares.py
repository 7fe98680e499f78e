"""Deserved shares: the cluster water-filled down the queue tree.

The root deserves the cluster (its healthy allocatable, within the root queue's
capability). Each queue's share is then cut among its children, resource by resource:

1. every child is owed its guarantee (if the guarantees do not fit, they share the
   amount in proportion);
2. a child naming ``deserved`` for the resource is owed that amount (Volcano's capacity
   plugin; if those do not fit above the guarantees, they share what is there);
3. the rest is water-filled by ``weight`` among the other children (Volcano's proportion
   plugin): one level ``x`` such that each gets ``weight * x``, but never less than its
   guarantee (Volcano's ``max(deserved, guarantee)``) nor more than it wants;
4. what nobody else wants is water-filled the same way among the children that named
   ``deserved`` and want more.

A child never deserves more than it *wants* -- what its subtree holds plus what its
pending gangs ask for, within its capability -- so a share nobody wants is not held for
anyone, and a queue deserves at most its parent's share. Amounts are floats in ledger
units (``capacity.ResourceAxis``); ``inf`` marks a capability that does not limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tierra.scheduler.queueing.queue_tree import ROOT, QueueTree

FloatArray = npt.NDArray[np.float64]
EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Claim:
    """One child's claim on its parent's share, per resource."""

    weight: float
    want: FloatArray  # what it holds and asks for, already within its capability
    floor: FloatArray  # its guarantee
    fixed: FloatArray  # its own ``deserved``; nan where it names none


@dataclass(frozen=True, slots=True)
class Limits:
    """A queue's own limits in ledger units (ancestors are applied by the tree walk)."""

    weight: float
    capability: FloatArray  # inf where it names none
    guarantee: FloatArray
    deserved: FloatArray  # nan where it names none


def _fill(lo: FloatArray, hi: FloatArray, weight: FloatArray, amount: float) -> FloatArray:
    """Water-fill ``amount``: each gets ``min(hi, max(lo, weight * x))`` for one level ``x``.

    The caller makes sure ``lo.sum() <= amount``; with weight 0 a claim stays at ``lo``.
    The sum is piecewise linear in ``x`` with breaks where a claim leaves its floor or
    reaches its want, so the level is found exactly between two breaks."""
    lo = np.minimum(lo, hi)
    pos = weight > 0

    def at(x: float) -> FloatArray:
        return np.where(pos, np.minimum(hi, np.maximum(lo, weight * x)), lo)

    if not pos.any():
        return lo.copy()
    w = weight[pos]
    breaks = np.unique(np.concatenate([lo[pos] / w, hi[pos] / w]))
    sums = np.array([float(at(float(b)).sum()) for b in breaks])
    k = int(np.searchsorted(sums, amount - EPS))
    if k >= len(breaks):
        return at(float(breaks[-1]))
    if k == 0:
        return at(float(breaks[0]))
    x0, x1 = float(breaks[k - 1]), float(breaks[k])
    s0, s1 = float(sums[k - 1]), float(sums[k])
    x = x1 if s1 - s0 <= EPS else x0 + (x1 - x0) * (amount - s0) / (s1 - s0)
    return at(x)


def split(amount: FloatArray, claims: Sequence[Claim]) -> list[FloatArray]:
    """Cut ``amount`` among ``claims`` (see the module docstring, steps 1-4)."""
    if not claims:
        return []
    hi = np.maximum(np.stack([c.want for c in claims]), 0.0)
    lo = np.minimum(np.maximum(np.stack([c.floor for c in claims]), 0.0), hi)
    fixed = np.stack([c.fixed for c in claims])
    weight = np.array([max(c.weight, 0.0) for c in claims], dtype=np.float64)
    out = hi.copy()  # a resource nobody wants more of than there is: everyone gets its want
    for r in np.flatnonzero(hi.sum(axis=0) > np.maximum(amount, 0.0)):
        a = max(float(amount[r]), 0.0)
        low, high = lo[:, r], hi[:, r]
        floors = float(low.sum())
        if floors >= a:  # guarantees alone use it up: they share it
            out[:, r] = low * (a / floors) if floors > 0 else 0.0
            continue
        named = ~np.isnan(fixed[:, r])
        target = np.where(named, np.clip(np.nan_to_num(fixed[:, r]), low, high), low)
        extra = float((target - low).sum())
        if floors + extra >= a:  # named deserved amounts share what is above the floors
            out[:, r] = low + (target - low) * ((a - floors) / extra)
            continue
        level = target.copy()
        rest = ~named
        if rest.any():
            spare = a - float(target[named].sum())
            level[rest] = _fill(low[rest], high[rest], weight[rest], spare)
        left = a - float(level.sum())
        if left > EPS and named.any():
            spare = left + float(target[named].sum())
            level[named] = _fill(target[named], high[named], weight[named], spare)
        out[:, r] = level
    return [out[i] for i in range(len(claims))]


def deserved_shares(
    tree: QueueTree,
    amount: FloatArray,
    want: Mapping[str, FloatArray],
    limits: Mapping[str, Limits],
) -> dict[str, FloatArray]:
    """Every queue's deserved share of ``amount`` (the cluster) down ``tree``.

    ``want``: per queue, what it holds itself plus what its own pending gangs ask for
    (the subtree sums are made here); ``limits``: per queue, its own limits. Broken
    queues get nothing."""
    zero = np.zeros_like(amount)
    sub_want: dict[str, FloatArray] = {}
    floor: dict[str, FloatArray] = {}
    for q in reversed(tree.order):
        lim = limits[q]
        kids = tree.children.get(q, ())
        w = want.get(q, zero) + sum((sub_want[k] for k in kids), zero)
        sub_want[q] = np.minimum(w, lim.capability)
        floor[q] = np.maximum(lim.guarantee, sum((floor[k] for k in kids), zero))
    out = {ROOT: np.minimum(np.maximum(amount, 0.0), limits[ROOT].capability)}
    for q in tree.order:
        kids = tree.children.get(q, ())
        claims = [Claim(limits[k].weight, sub_want[k], floor[k], limits[k].deserved) for k in kids]
        for k, share in zip(kids, split(out[q], claims), strict=True):
            out[k] = share
    return out
