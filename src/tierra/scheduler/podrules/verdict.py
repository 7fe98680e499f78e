"""What a pod rule says about one pod: the nodes it allows and, if any are refused, why.

A verdict keeps, per node, the code of the reason it was refused for (0: allowed), so
verdicts of several filters combine as kube-scheduler's do: each node is counted once, by
the first filter that refused it. Reasons are kube-scheduler's own per-node phrases, so
``summary`` says what its FitError says: "0/5 nodes are available: 2 node(s) didn't
match pod anti-affinity rules, 3 node(s) didn't have free ports for the requested pod
ports."
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tierra.topology.arrays import BoolArray

Codes = npt.NDArray[np.int8]


@dataclass(frozen=True, slots=True)
class Refusal:
    """One filter's refusal: its upstream plugin name, its phrase, how many nodes."""

    filter: str  # e.g. "NodePorts", "InterPodAffinity"
    reason: str  # e.g. "node(s) didn't have free ports for the requested pod ports"
    nodes: int

    def describe(self) -> str:
        return f"{self.nodes} {self.reason}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One filter on one pod: ``codes[i]`` is 0 where node i is allowed, else 1 + the
    index of its reason in ``reasons``."""

    filter: str
    codes: Codes
    reasons: tuple[str, ...] = ()

    @property
    def mask(self) -> BoolArray:
        out: BoolArray = self.codes == 0
        return out

    @property
    def refusals(self) -> tuple[Refusal, ...]:
        counts = np.bincount(self.codes, minlength=len(self.reasons) + 1)
        return tuple(
            Refusal(self.filter, why, int(counts[i + 1]))
            for i, why in enumerate(self.reasons)
            if counts[i + 1]
        )


class Marker:
    """Builds a verdict: ``refuse(nodes, reason)`` marks nodes not marked yet."""

    def __init__(self, filter_name: str, count: int) -> None:
        self.filter = filter_name
        self.codes: Codes = np.zeros(count, dtype=np.int8)
        self.reasons: list[str] = []

    def refuse(self, nodes: BoolArray | npt.NDArray[np.int64], reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)
        code = self.reasons.index(reason) + 1
        if nodes.dtype == np.bool_:
            self.codes[nodes & (self.codes == 0)] = code
        else:
            picked = self.codes[nodes]
            self.codes[nodes] = np.where(picked == 0, code, picked)

    def refuse_all(self, reason: str) -> None:
        self.refuse(np.ones(len(self.codes), dtype=bool), reason)

    def done(self) -> Verdict:
        return Verdict(self.filter, self.codes, tuple(self.reasons))


def allowed(verdicts: Iterable[Verdict], count: int) -> BoolArray:
    mask = np.ones(count, dtype=bool)
    for v in verdicts:
        mask &= v.codes == 0
    return mask


def first_refusals(verdicts: Sequence[Verdict], within: BoolArray) -> list[Refusal]:
    """Per filter and reason, the nodes of ``within`` refused, each by its first filter."""
    open_ = within.copy()
    out: list[Refusal] = []
    for v in verdicts:
        hit = open_ & (v.codes != 0)
        if not hit.any():
            continue
        counts = np.bincount(v.codes[hit], minlength=len(v.reasons) + 1)
        out.extend(
            Refusal(v.filter, why, int(counts[i + 1]))
            for i, why in enumerate(v.reasons)
            if counts[i + 1]
        )
        open_ &= ~hit
    return out


def summary(total: int, refusals: Iterable[Refusal]) -> str:
    """kube-scheduler's FitError line: the nodes left of ``total``, and why the others."""
    merged: dict[str, int] = {}
    refused = 0
    for r in refusals:
        merged[r.reason] = merged.get(r.reason, 0) + r.nodes
        refused += r.nodes
    parts = ", ".join(f"{n} {why}" for why, n in sorted(merged.items()))
    return f"{max(0, total - refused)}/{total} nodes are available: {parts}."
