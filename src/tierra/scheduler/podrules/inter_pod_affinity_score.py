"""InterPodAffinity's score, as ``plugins/interpodaffinity/scoring.go`` computes it.

For the incoming pod P, per topology key and domain (``processExistingPod``):

* each of P's preferred affinity terms adds its weight to the domain of every placed pod
  it matches (namespaces from P's side, ``namespaceSelector`` merged), each preferred
  anti-affinity term takes its weight away;
* symmetrically, each placed pod's preferred affinity term that P matches adds its
  weight to the placed pod's domain, its preferred anti-affinity term takes it away, and
  its *required* affinity term adds ``hardPodAffinityWeight`` (the plugin's argument,
  1 by default; 0 turns it off).

A node's raw score is the sum over keys of its domain's total (0 without the key).
``normalize`` maps the feasible nodes' scores onto 0-100 between their least and their
greatest, truncated as upstream's ``int64(float)``; all 0 when they are equal.

The cost is the placed pods P's selectors can match (``PodIndex.matching``) and the held
terms P could match (``SoftTerms.for_labels``), not every pod.
"""

from __future__ import annotations

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.podrules.state import MISSING, NodeTable, PodIndex
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

NAME = "InterPodAffinity"
MAX_NODE_SCORE = 100
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs' default


def _matches(pod: Pod, selector_ok: bool, spaces: frozenset[str] | None) -> bool:
    return selector_ok and (spaces is None or pod.namespace in spaces)


def _totals(
    pod: Pod, nodes: NodeTable, placed: PodIndex, hard_weight: int
) -> dict[str, dict[int, int]]:
    """Per topology key, per domain code, the summed weights (module docstring)."""
    totals: dict[str, dict[int, int]] = {}

    def add(key: str, node: str, amount: int) -> None:
        at = nodes.position.get(node)
        if at is None or not amount:
            return
        code = int(nodes.values(key)[0][at])
        if code != MISSING:
            per = totals.setdefault(key, {})
            per[code] = per.get(code, 0) + amount

    rules = pod.rules
    if rules is not None:
        for terms, sign in ((rules.preferred_affinity, 1), (rules.preferred_anti_affinity, -1)):
            for t in terms:
                spaces = placed.namespaces_of(t, pod.namespace)
                for entry in placed.matching(t.selector, spaces):
                    if entry.pod.key != pod.key:
                        add(t.topology_key, entry.node, sign * t.weight)
    labels = pod.meta.labels
    for held in placed.soft.for_labels(labels):
        weight = held.weight(hard_weight)
        if not weight or not _matches(pod, held.term.matches_pod(labels), held.spaces):
            continue
        for node, count in held.nodes.items():
            add(held.term.topology_key, node, weight * count)
    return totals


def raw(
    pod: Pod, nodes: NodeTable, placed: PodIndex, hard_weight: int = HARD_POD_AFFINITY_WEIGHT
) -> IntArray | None:
    """Per node, the raw score; None when nothing scores the pod (PreScore's Skip)."""
    rules = pod.rules
    own = rules is not None and (rules.preferred_affinity or rules.preferred_anti_affinity)
    if not own and not placed.soft.terms:
        return None
    totals = _totals(pod, nodes, placed, hard_weight)
    if not totals:
        return None
    out = np.zeros(len(nodes), dtype=np.int64)
    for key, per in totals.items():
        codes, names = nodes.values(key)
        lut = np.zeros(len(names) + 1, dtype=np.int64)  # the last slot: nodes without it
        for code, total in per.items():
            lut[code] = total
        out += lut[codes]
    return out


def normalize(scores: IntArray, feasible: BoolArray) -> IntArray:
    """Min-max onto 0-100 over the feasible nodes, truncated (0 elsewhere)."""
    out = np.zeros(len(scores), dtype=np.int64)
    if not feasible.any():
        return out
    low, high = int(scores[feasible].min()), int(scores[feasible].max())
    if high > low:
        frac = (scores[feasible] - low).astype(np.float64) / float(high - low)
        out[feasible] = (float(MAX_NODE_SCORE) * frac).astype(np.int64)
    return out
