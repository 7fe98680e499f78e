"""Asking a gang's constraints on the hot path: per-node caps and the score shares.

Both loop over the few constraints that define the hook and apply to the gang
(``Cycle.hooks``: ``registry.applying``), each answering for every node or domain at
once with one array.
"""

from __future__ import annotations

import numpy as np

from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal
from tierra.scheduler.placement.demand import Shape
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray


def domain_scores(
    cycle: Cycle, request: IntArray, domains: IntArray, sticky: int | None
) -> FloatArray:
    """Every scoring constraint's share of each domain's score, summed."""
    total: FloatArray | None = None
    for c in cycle.hooks.domain_scores:
        part = c.domain_scores(cycle, request, domains, sticky)
        if part is not None:
            total = part if total is None else total + part
    return total if total is not None else np.zeros(len(domains), dtype=np.float64)


def capped(cycle: Cycle, shape: Shape, nodes: IntArray, counts: IntArray) -> list[Refusal]:
    """Lower ``counts`` (pods of ``shape`` per node of ``nodes``) to every constraint's
    per-node cap, in place; the refusals of those that lowered any."""
    return apply_caps(cycle, caps_for(cycle, shape, nodes), counts)


def caps_for(cycle: Cycle, shape: Shape, nodes: IntArray) -> list[tuple[Constraint, IntArray]]:
    """The caps the constraints give ``shape`` on ``nodes`` (those that give one)."""
    out = []
    for c in cycle.hooks.node_caps:
        caps = c.node_caps(cycle, shape, nodes)
        if caps is not None:
            out.append((c, caps))
    return out


def apply_caps(
    cycle: Cycle, given: list[tuple[Constraint, IntArray]], counts: IntArray
) -> list[Refusal]:
    """``capped`` with the caps asked already (``caps_for``): the flat path asks once
    per shape and applies them to counts it copies."""
    out: list[Refusal] = []
    for c, caps in given:
        over = counts > caps
        if over.any():
            np.minimum(counts, np.maximum(caps, 0), out=counts)
            refusal = c.cap_refusal(cycle, int(over.sum()))
            if refusal is not None:
                out.append(refusal)
    return out


def node_scores(cycle: Cycle, request: IntArray, nodes: IntArray, region: int) -> FloatArray:
    """Every scoring constraint's share of each node's score, summed (the flat path)."""
    total: FloatArray | None = None
    for c in cycle.hooks.node_scores:
        part = c.node_scores(cycle, request, nodes, region)
        if part is not None:
            total = part if total is None else total + part
    return total if total is not None else np.zeros(len(nodes), dtype=np.float64)
