"""PodTopologySpread's filter: ``whenUnsatisfiable: DoNotSchedule`` constraints.

For each such constraint of pod P, as ``podtopologyspread/filtering.go`` decides it:
the eligible nodes are those with every hard constraint's topology key, matching P's
node affinity if ``nodeAffinityPolicy`` is Honor (the default) and tolerating its
NoSchedule/NoExecute taints if ``nodeTaintsPolicy`` is Honor (default Ignore); pods of
P's namespace that the selector matches are counted per domain over eligible nodes; the
global minimum is the least count over eligible domains, or 0 while they number fewer
than ``minDomains``. A node without the key is refused; otherwise it passes when its
domain's count, plus 1 if P matches the selector, minus the minimum is at most
``maxSkew``. ``matchLabelKeys`` were merged into the selector when the pod was read.

Counting walks the pods the selector can match (``PodIndex.matching``), not every pod.
"""

from __future__ import annotations

import numpy as np

from tierra.api.pod import Pod
from tierra.api.pod_rules import HONOR, SpreadConstraint
from tierra.scheduler.podrules.state import MISSING, NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import Marker, Verdict
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

NAME = "PodTopologySpread"
NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = NOT_MATCH + " (missing required label)"


def _eligible(pod: Pod, c: SpreadConstraint, has_keys: BoolArray, nodes: NodeTable) -> BoolArray:
    mask = has_keys
    if c.node_affinity_policy == HONOR:
        mask = mask & nodes.node_affinity(pod)
    if c.node_taints_policy == HONOR:
        mask = mask & nodes.tolerated(pod)
    return mask


def _counts(
    pod: Pod,
    c: SpreadConstraint,
    nodes: NodeTable,
    eligible: BoolArray,
    placed: PodIndex,
) -> IntArray:
    """Matching pods per domain code, on eligible nodes only."""
    codes, _ = nodes.values(c.topology_key)
    width = int(codes.max()) + 1 if len(codes) else 0
    counts = np.zeros(width + 1, dtype=np.int64)  # the last slot: nodes without the key
    if c.selector is None or c.selector.empty:
        return counts  # countPodsMatchSelector counts nothing for an empty selector
    at = nodes.position
    for entry in placed.matching(c.selector, frozenset((pod.namespace,))):
        i = at.get(entry.node)
        if i is not None and entry.pod.key != pod.key and eligible[i]:
            counts[codes[i]] += 1
    return counts


def _state(
    pod: Pod, c: SpreadConstraint, has_keys: BoolArray, nodes: NodeTable, placed: PodIndex
) -> tuple[IntArray, IntArray, int]:
    """Per node its domain code, per domain the matching pods, and the global minimum."""
    codes, _ = nodes.values(c.topology_key)
    eligible = _eligible(pod, c, has_keys, nodes)
    counts = _counts(pod, c, nodes, eligible, placed)
    domains = _present(codes[eligible])
    low = int(counts[domains].min()) if len(domains) >= max(1, c.min_domains) else 0
    return codes, counts, low


def _present(codes: IntArray) -> IntArray:
    """``np.unique(codes)`` for label codes (small ints): a count per code, not a sort
    or hash of every node's (asked once per pod with spread, over every node)."""
    if len(codes) == 0 or int(codes.min()) < 0:
        return np.unique(codes)
    return np.flatnonzero(np.bincount(codes))


def _has_keys(hard: tuple[SpreadConstraint, ...], nodes: NodeTable) -> BoolArray:
    has_keys = np.ones(len(nodes), dtype=bool)
    for c in hard:
        has_keys &= nodes.values(c.topology_key)[0] != MISSING
    return has_keys


def evaluate(pod: Pod, nodes: NodeTable, placed: PodIndex) -> Verdict | None:
    """None when the pod has no DoNotSchedule constraint (Skip)."""
    hard = pod.rules.hard_spread if pod.rules is not None else ()
    if not hard:
        return None
    mark = Marker(NAME, len(nodes))
    has_keys = _has_keys(hard, nodes)
    labels = pod.meta.labels
    for c in hard:
        codes, counts, low = _state(pod, c, has_keys, nodes, placed)
        mark.refuse(codes == MISSING, MISSING_LABEL)
        own = 1 if c.selector is not None and c.selector.matches(labels) else 0
        skew = counts[codes] + own - low  # codes of -1 read the last slot (refused above)
        mark.refuse(skew > c.max_skew, NOT_MATCH)
    return mark.done()
