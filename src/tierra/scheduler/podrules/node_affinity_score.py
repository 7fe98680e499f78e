"""NodeAffinity's score: a pod's ``preferredDuringSchedulingIgnoredDuringExecution``
node affinity, as ``plugins/nodeaffinity/node_affinity.go`` scores it.

A node's raw score is the sum of the weights of the preferred terms it matches (a term
matches when all its expressions and fields hold; an empty term matches nothing, as
upstream skips it). ``normalize`` is ``helper.DefaultNormalizeScore``: each feasible
node's score times 100 over the highest, in integers; all 0 when none matches.
"""

from __future__ import annotations

import weakref

import numpy as np

from tierra.api.pod import Pod
from tierra.api.pod_rules import PreferredNodeTerm
from tierra.scheduler.podrules.state import NodeTable
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

NAME = "NodeAffinity"
MAX_NODE_SCORE = 100

# per node table, the raw scores of each distinct set of preferred terms (a session's
# pods repeat a few templates; the table is rebuilt, and this forgotten, with the index)
_MEMO: weakref.WeakKeyDictionary[NodeTable, dict[tuple[PreferredNodeTerm, ...], IntArray]] = (
    weakref.WeakKeyDictionary()
)


def raw(pod: Pod, nodes: NodeTable) -> IntArray | None:
    """Per node of ``nodes``, the summed weight of the pod's preferred terms it matches;
    None when the pod has none (PreScore's Skip)."""
    terms = pod.rules.preferred_nodes if pod.rules is not None else ()
    if not terms:
        return None
    memo = _MEMO.setdefault(nodes, {})
    found = memo.get(terms)
    if found is None:
        found = np.zeros(len(nodes), dtype=np.int64)
        for t in terms:
            hit = [t.preference.matches(n.name, n.labels) for n in nodes.nodes]
            found += t.weight * np.asarray(hit, dtype=np.int64)
        memo[terms] = found
    return found


def normalize(scores: IntArray, feasible: BoolArray) -> IntArray:
    """``DefaultNormalizeScore(100, reverse=false)`` over the feasible nodes (0 elsewhere)."""
    out = np.zeros(len(scores), dtype=np.int64)
    if not feasible.any():
        return out
    high = int(scores[feasible].max())
    if high <= 0:
        return out
    out[feasible] = MAX_NODE_SCORE * scores[feasible] // high
    return out
