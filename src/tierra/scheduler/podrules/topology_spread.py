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

Counting reads the nodes holding pods the selector matches (``PodIndex.tally``, kept up
to date as pods are placed), not every pod; what depends only on the pod's node affinity,
tolerations and constraint -- the eligible nodes and their domains -- is computed once per
distinct pod shape in the session's ``NodeTable``.
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


def _domains(
    pod: Pod, c: SpreadConstraint, hard: tuple[SpreadConstraint, ...], nodes: NodeTable
) -> tuple[BoolArray, IntArray]:
    """The eligible nodes and the domain codes among them, once per table and distinct
    (constraint, keys of the pod's hard constraints, node affinity, tolerations): a
    gang's replicas, decided one by one, share them."""
    honor_affinity = c.node_affinity_policy == HONOR
    honor_taints = c.node_taints_policy == HONOR
    key = (
        c.topology_key,
        tuple(h.topology_key for h in hard),
        (tuple(sorted(pod.node_selector.items())), pod.affinity_terms) if honor_affinity else 0,
        pod.tolerations if honor_taints else 0,
    )
    found = nodes.spread.get(key)
    if found is None:
        codes, _ = nodes.values(c.topology_key)
        eligible = _eligible(pod, c, _has_keys(hard, nodes), nodes)
        found = nodes.spread[key] = (eligible, _present(codes[eligible]))
    return found


def _counts(
    pod: Pod,
    c: SpreadConstraint,
    nodes: NodeTable,
    eligible: BoolArray,
    placed: PodIndex,
) -> IntArray:
    """Matching pods per domain code, on eligible nodes only."""
    codes, names = nodes.values(c.topology_key)
    counts = np.zeros(len(names) + 1, dtype=np.int64)  # the last slot: nodes without the key
    if c.selector is None or c.selector.empty:
        return counts  # countPodsMatchSelector counts nothing for an empty selector
    spaces = frozenset((pod.namespace,))
    itself = placed.counted_at(pod, c.selector, spaces)
    tally = placed.tally(c.selector, spaces)
    if not tally:
        return counts
    where = nodes.positions(tally)
    many = np.fromiter(tally.values(), dtype=np.int64, count=len(tally))
    if itself is not None:
        many[where == nodes.position.get(itself, MISSING)] -= 1  # not counted by itself
    kept = where != MISSING
    where, many = where[kept], many[kept]
    kept = eligible[where]  # eligible nodes all have the key: no code of -1 below
    np.add.at(counts, codes[where[kept]], many[kept])
    return counts


def _state(
    pod: Pod,
    c: SpreadConstraint,
    hard: tuple[SpreadConstraint, ...],
    nodes: NodeTable,
    placed: PodIndex,
) -> tuple[IntArray, IntArray, int]:
    """Per node its domain code, per domain the matching pods, and the global minimum."""
    codes, _ = nodes.values(c.topology_key)
    eligible, domains = _domains(pod, c, hard, nodes)
    counts = _counts(pod, c, nodes, eligible, placed)
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
    labels = pod.meta.labels
    for c in hard:
        codes, counts, low = _state(pod, c, hard, nodes, placed)
        mark.refuse(nodes.missing(c.topology_key), MISSING_LABEL)
        own = 1 if c.selector is not None and c.selector.matches(labels) else 0
        skewed = counts + own - low > c.max_skew  # per domain: a look-up per node, not sums
        mark.refuse(skewed[codes], NOT_MATCH)  # codes of -1 read the last slot (refused above)
    return mark.done()
