"""PodTopologySpread's score: ``whenUnsatisfiable: ScheduleAnyway`` constraints, as
``plugins/podtopologyspread/scoring.go`` scores them.

Counting (``counts``, PreScore): per constraint, the pods of P's namespace its selector
matches (an empty selector counts none), per domain over the nodes that carry every one
of P's ScheduleAnyway keys and pass the inclusion policies (node affinity when
``nodeAffinityPolicy`` is Honor, the default; taints when ``nodeTaintsPolicy`` is Honor);
by hostname, per node.

Scoring (``scores``, Score and NormalizeScore) over the feasible nodes: a feasible node
missing a key is ignored (scores 0); every other one scores, per constraint, its domain's
count times ``log(domains + 2)`` -- the domains among the scoring nodes (for hostname,
the scoring nodes) -- plus ``maxSkew - 1``, summed and rounded; then the fewest pods
score 100: ``100 * (max + min - s) / max`` in integers, or 100 for all when max is 0.

``minDomains`` has no effect here, as upstream. Pods being deleted are counted (tierra's
pods carry no deletion timestamp; the API removes them soon after).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierra.api.pod import Pod
from tierra.api.pod_rules import HONOR, SpreadConstraint
from tierra.scheduler.podrules.state import MISSING, NodeTable, PodIndex
from tierra.topology.arrays import BoolArray, FloatArray
from tierra.topology.index import IntArray

NAME = "PodTopologySpread"
HOSTNAME = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100


@dataclass(frozen=True, slots=True)
class Counted:
    """One constraint's counts: per node its domain code (or its own position, by
    hostname) and per code the matching pods (the last slot: nodes without the key)."""

    constraint: SpreadConstraint
    codes: IntArray
    counts: IntArray


@dataclass(frozen=True, slots=True)
class Counts:
    """Every ScheduleAnyway constraint's counts, and the nodes carrying all their keys."""

    constraints: tuple[Counted, ...]
    has_keys: BoolArray


def _count(
    pod: Pod, c: SpreadConstraint, nodes: NodeTable, placed: PodIndex, has_keys: BoolArray
) -> Counted:
    by_node = c.topology_key == HOSTNAME
    if by_node:
        codes = np.arange(len(nodes), dtype=np.int64)
        width = len(nodes)
    else:
        codes = nodes.values(c.topology_key)[0]
        width = len(nodes.values(c.topology_key)[1])
    counts = np.zeros(width + 1, dtype=np.int64)
    if c.selector is None or c.selector.empty:
        return Counted(c, codes, counts)
    eligible = np.ones(len(nodes), dtype=bool)
    if not by_node:  # by hostname upstream counts the scored node's own pods as they are
        eligible &= has_keys  # requireAllTopologies: a node without every key counts none
        if c.node_affinity_policy == HONOR:
            eligible &= nodes.node_affinity(pod)
        if c.node_taints_policy == HONOR:
            eligible &= nodes.tolerated(pod)
    at = nodes.position
    for entry in placed.matching(c.selector, frozenset((pod.namespace,))):
        i = at.get(entry.node)
        if i is not None and entry.pod.key != pod.key and eligible[i] and codes[i] != MISSING:
            counts[codes[i]] += 1
    return Counted(c, codes, counts)


def counts(pod: Pod, nodes: NodeTable, placed: PodIndex) -> Counts | None:
    """None when the pod has no ScheduleAnyway constraint (PreScore's Skip)."""
    soft = pod.rules.soft_spread if pod.rules is not None else ()
    if not soft:
        return None
    has_keys = np.ones(len(nodes), dtype=bool)
    for c in soft:
        has_keys &= nodes.values(c.topology_key)[0] != MISSING
    return Counts(tuple(_count(pod, c, nodes, placed, has_keys) for c in soft), has_keys)


def scores(counted: Counts, nodes: IntArray, feasible: BoolArray) -> IntArray:
    """The normalized score (0-100) of each of ``nodes`` (0 where not ``feasible``)."""
    out = np.zeros(len(nodes), dtype=np.int64)
    scoring = feasible & counted.has_keys[nodes]
    if not scoring.any():
        return out
    total: FloatArray = np.zeros(int(scoring.sum()), dtype=np.float64)
    at = nodes[scoring]
    for k in counted.constraints:
        codes = k.codes[at]
        if k.constraint.topology_key == HOSTNAME:
            size = len(at)
        else:  # the domains among the scoring nodes (codes >= 0 there: they have every key)
            size = int(np.count_nonzero(np.bincount(codes, minlength=len(k.counts))))
        total += k.counts[codes] * np.log(size + 2) + (k.constraint.max_skew - 1)
    raw = np.floor(total + 0.5).astype(np.int64)  # math.Round (the sums are >= 0)
    high, low = max(int(raw.max()), 0), int(raw.min())
    if high == 0:
        out[scoring] = MAX_NODE_SCORE
    else:
        out[scoring] = MAX_NODE_SCORE * (high + low - raw) // high
    return out
