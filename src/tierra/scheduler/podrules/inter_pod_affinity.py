"""InterPodAffinity's filter: required pod affinity and anti-affinity, both directions.

For a pod P on node N, as kube-scheduler's ``filtering.go`` decides it:

* affinity: for every required term, N has the term's topology key and some placed pod
  matching *all* of P's terms sits in N's domain of that key -- unless no placed pod
  matches them at all and P matches its own terms (the first pod of a series that wants
  itself), when every node with all the keys passes;
* anti-affinity: for no required term does a placed pod matching it sit in N's domain;
* existing pods' anti-affinity, applied symmetrically: no placed pod E has a required
  anti-affinity term that P matches (namespaces read from E's side) with E in N's domain.

The cost is the nodes holding pods each anti-affinity selector matches (``PodIndex.tally``,
kept up to date as pods are placed), the pods the affinity terms can match
(``PodIndex.matching``), and the nodes of placed pods holding anti-affinity terms; not
every pod on every node.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tierra.api.pod import Pod
from tierra.api.pod_rules import PodAffinityTerm
from tierra.scheduler.podrules.state import MISSING, NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import Marker, Verdict
from tierra.topology.arrays import BoolArray

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"


def _term_matches(term: PodAffinityTerm, pod: Pod, namespaces: frozenset[str] | None) -> bool:
    in_namespace = namespaces is None or pod.namespace in namespaces
    return in_namespace and term.matches_pod(pod.meta.labels)


def _in_domains(nodes: NodeTable, key: str, domains: Iterable[int]) -> BoolArray:
    return nodes.in_domains(key, domains)


def _affinity(
    pod: Pod, terms: tuple[PodAffinityTerm, ...], nodes: NodeTable, placed: PodIndex
) -> BoolArray:
    """Nodes that fail P's required affinity terms."""
    spaces = [placed.namespaces_of(t, pod.namespace) for t in terms]
    first, rest = terms[0], list(zip(terms[1:], spaces[1:], strict=True))
    domains: list[set[int]] = [set() for _ in terms]
    found = False
    for entry in placed.matching(first.selector, spaces[0]):
        other = entry.pod
        at = nodes.position.get(entry.node)
        if at is None or other.key == pod.key:
            continue
        if not all(_term_matches(t, other, s) for t, s in rest):
            continue
        found = True
        for i, t in enumerate(terms):
            code = nodes.values(t.topology_key)[0][at]
            if code != MISSING:
                domains[i].add(int(code))
    has_keys = np.ones(len(nodes), dtype=bool)
    for t in terms:
        has_keys &= nodes.values(t.topology_key)[0] != MISSING
    if not found:
        if all(_term_matches(t, pod, s) for t, s in zip(terms, spaces, strict=True)):
            return ~has_keys
        return np.ones(len(nodes), dtype=bool)
    ok = has_keys
    for t, d in zip(terms, domains, strict=True):
        ok = ok & _in_domains(nodes, t.topology_key, d)
    return ~ok


def _anti_affinity(
    pod: Pod, terms: tuple[PodAffinityTerm, ...], nodes: NodeTable, placed: PodIndex
) -> BoolArray:
    """Nodes in a domain holding a pod that one of P's anti-affinity terms matches."""
    refused = np.zeros(len(nodes), dtype=bool)
    for t in terms:
        if t.selector is None:
            continue  # matches no pod
        spaces = placed.namespaces_of(t, pod.namespace)
        itself = placed.counted_at(pod, t.selector, spaces)
        tally = placed.tally(t.selector, spaces)
        alone = itself if itself is not None and tally.get(itself) == 1 else None
        at = nodes.around(t.topology_key, tally, but=alone)  # the pod is not its own neighbour
        if at is not None:
            refused |= at
    return refused


def _existing_anti_affinity(pod: Pod, nodes: NodeTable, placed: PodIndex) -> BoolArray:
    """Nodes in a domain of a placed pod whose anti-affinity term P matches (one look per
    distinct term, however many pods hold it)."""
    refused = np.zeros(len(nodes), dtype=bool)
    for held in placed.anti_terms_for(pod.meta.labels):
        t = held.term
        if not _term_matches(t, pod, held.spaces):
            continue
        at = nodes.around(t.topology_key, held.nodes)
        if at is not None:
            refused |= at
    return refused


def evaluate(pod: Pod, nodes: NodeTable, placed: PodIndex) -> Verdict | None:
    """None when neither P nor any placed pod has required inter-pod rules (Skip)."""
    rules = pod.rules
    affinity = rules.affinity if rules is not None else ()
    anti = rules.anti_affinity if rules is not None else ()
    if not affinity and not anti and not placed.anti_terms:
        return None
    mark = Marker(NAME, len(nodes))
    if affinity:
        mark.refuse(_affinity(pod, affinity, nodes, placed), AFFINITY)
    if anti:
        mark.refuse(_anti_affinity(pod, anti, nodes, placed), ANTI_AFFINITY)
    if placed.anti_terms:
        mark.refuse(_existing_anti_affinity(pod, nodes, placed), EXISTING_ANTI_AFFINITY)
    return mark.done()
