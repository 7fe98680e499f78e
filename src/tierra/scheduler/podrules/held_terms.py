"""Placed pods' terms that score incoming pods: InterPodAffinity's symmetric preferences.

kube-scheduler's InterPodAffinity scores a node not only by the incoming pod's own
preferred terms but by the placed pods' terms the incoming pod matches
(``scoring.go``, ``processExistingPod``): a placed pod's preferred affinity term adds its
weight to every node in its domain, a preferred anti-affinity term takes it away, and a
*required* affinity term adds ``hardPodAffinityWeight``. ``SoftTerms`` keeps those terms
of every placed pod (bound, assumed, or of this attempt's overlay), one entry per
distinct term with the nodes of the pods holding it, indexed by a label pair the term's
selector requires -- so an incoming pod looks only at the terms it could match, and a
cluster whose pods hold none pays nothing.

``PodIndex`` (``state.py``) calls ``add``/``remove`` as it indexes pods; each pod's keys
are kept with it, so a term whose namespaces changed since (a Namespace relabelled) is
still taken out exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from tierra.api.pod import Pod
from tierra.api.pod_rules import PodAffinityTerm

AFFINITY = 1  # a preferred affinity term: +weight
ANTI = -1  # a preferred anti-affinity term: -weight
REQUIRED = 0  # a required affinity term: +hardPodAffinityWeight (the plugin's argument)

SpacesOf = Callable[[PodAffinityTerm, str], "frozenset[str] | None"]


@dataclass(slots=True)
class HeldSoft:
    """One distinct scoring term of placed pods, and how many hold it on each node."""

    term: PodAffinityTerm
    spaces: frozenset[str] | None  # the namespaces it reads, from its holder's side
    kind: int  # AFFINITY, ANTI or REQUIRED
    nodes: dict[str, int]  # node name -> pods there holding it

    def weight(self, hard_weight: int) -> int:
        """What the term adds per holder to a matching incoming pod's domain."""
        return hard_weight if self.kind == REQUIRED else self.kind * self.term.weight


def _required_pair(term: PodAffinityTerm) -> tuple[str, str] | None:
    sel = term.selector
    if sel is None or not sel.match_labels:
        return None
    return min(sel.match_labels.items())


@dataclass(slots=True)
class SoftTerms:
    """Every placed pod's scoring terms (module docstring)."""

    terms: dict[Hashable, HeldSoft] = field(default_factory=dict)
    by_label: dict[tuple[str, str] | None, set[Hashable]] = field(default_factory=dict)
    owned: dict[str, tuple[str, tuple[Hashable, ...]]] = field(default_factory=dict)

    def add(self, pod: Pod, node: str, spaces_of: SpacesOf) -> None:
        rules = pod.rules
        if rules is None:
            return
        held = (
            *((t, AFFINITY) for t in rules.preferred_affinity),
            *((t, ANTI) for t in rules.preferred_anti_affinity),
            *((t, REQUIRED) for t in rules.affinity),
        )
        if not held:
            return
        keys: list[Hashable] = []
        for t, kind in held:
            spaces = spaces_of(t, pod.namespace)
            key = (kind, t.weight, t.topology_key, t.selector, spaces)
            entry = self.terms.get(key)
            if entry is None:
                entry = self.terms[key] = HeldSoft(t, spaces, kind, {})
                self.by_label.setdefault(_required_pair(t), set()).add(key)
            entry.nodes[node] = entry.nodes.get(node, 0) + 1
            keys.append(key)
        self.owned[pod.key] = (node, tuple(keys))

    def remove(self, key: str) -> None:
        found = self.owned.pop(key, None)
        if found is None:
            return
        node, keys = found
        for k in keys:
            entry = self.terms[k]
            entry.nodes[node] -= 1
            if not entry.nodes[node]:
                del entry.nodes[node]
            if not entry.nodes:
                del self.terms[k]
                pair = _required_pair(entry.term)
                left = self.by_label.get(pair)
                if left is not None:
                    left.discard(k)
                    if not left:
                        del self.by_label[pair]

    def copy(self) -> SoftTerms:
        """Terms of its own over the same pods (``PodIndex.copy``, a view's fork)."""
        return SoftTerms(
            {k: HeldSoft(h.term, h.spaces, h.kind, dict(h.nodes)) for k, h in self.terms.items()},
            {k: set(v) for k, v in self.by_label.items()},
            dict(self.owned),
        )

    def for_labels(self, labels: Mapping[str, str]) -> list[HeldSoft]:
        """The held terms a pod with ``labels`` could match (checked in full by the
        caller); order-free, their weights are summed as integers."""
        if not self.terms:
            return []
        by = self.by_label
        keys = set(by.get(None, ()))
        for pair in labels.items():
            keys |= by.get(pair, set())
        return [self.terms[k] for k in keys]
