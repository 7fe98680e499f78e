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

from tierra.api.labels import Operator, Requirement
from tierra.api.pod import NodeSelectorTerm, Pod
from tierra.api.pod_rules import PreferredNodeTerm
from tierra.scheduler.podrules.state import MISSING, NodeTable
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
            found += t.weight * _matching(t.preference, nodes).astype(np.int64)
        memo[terms] = found
    return found


def _matching(term: NodeSelectorTerm, nodes: NodeTable) -> BoolArray:
    """Nodes ``term`` matches, over the table's label codes (no loop over nodes but for
    Gt/Lt, which compare integers); an empty term matches none."""
    if not term.match_expressions and not term.match_fields:
        return np.zeros(len(nodes), dtype=bool)
    ok = np.ones(len(nodes), dtype=bool)
    for r in term.match_expressions:
        ok &= _requirement(r, *nodes.values(r.key), nodes)
    for r in term.match_fields:  # metadata.name, the only field a term may name
        ok &= np.fromiter(
            (r.matches({"metadata.name": n}) for n in nodes.names),
            dtype=bool,
            count=len(nodes),
        )
    return ok


def _requirement(r: Requirement, codes: IntArray, values: list[str], nodes: NodeTable) -> BoolArray:
    if r.operator in (Operator.IN, Operator.NOT_IN):
        wanted = [i for i, v in enumerate(values) if v in r.values]
        hit: BoolArray = np.isin(codes, np.array(wanted, dtype=np.int64)) & (codes != MISSING)
        return hit if r.operator is Operator.IN else ~hit
    if r.operator is Operator.EXISTS:
        out: BoolArray = codes != MISSING
        return out
    if r.operator is Operator.DOES_NOT_EXIST:
        out = codes == MISSING
        return out
    return np.fromiter(  # Gt / Lt
        (r.matches(n.labels) for n in nodes.nodes), dtype=bool, count=len(nodes)
    )


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
