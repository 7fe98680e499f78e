"""The indexes pod rules read, built once per session and kept up to date as it places pods.

``NodeTable`` holds the nodes in the session's order, with each topology key's values
as an integer code per node (computed once per key). ``PodIndex`` holds every pod that
holds a node -- bound, assumed, or placed earlier in this session (``add``; ``remove``
undoes it when a gang's transaction rolls back) -- indexed by label, namespace and node,
so a selector looks only at the pods it could match, never at every pod per node; and,
per selector the filters ask again and again (a gang placed pod by pod), the matching pods
per node, moved by ``add``/``remove`` (``tallies.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from tierra.api.labels import LabelSelector, Operator
from tierra.api.node import Node, TaintEffect
from tierra.api.pod import Pod
from tierra.api.pod_rules import HostPort, PodAffinityTerm
from tierra.scheduler.podrules.held_terms import SoftTerms
from tierra.scheduler.podrules.tallies import Tallies, Tally, selector_key
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

MISSING = -1


def term_key(term: PodAffinityTerm, spaces: frozenset[str] | None) -> Hashable:
    """What makes two pods' terms the same rule (replicas share one)."""
    return (term.topology_key, selector_key(term.selector), spaces)


@dataclass(slots=True)
class HeldTerm:
    """One distinct required anti-affinity term of placed pods, and where they sit."""

    term: PodAffinityTerm
    spaces: frozenset[str] | None  # the namespaces it reads (None: all)
    nodes: dict[str, int]  # node name -> pods there holding it


class NodeTable:
    """Nodes by position; per topology key, each node's value as a code (-1: no label)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.names = [n.name for n in nodes]
        self.position = {name: i for i, name in enumerate(self.names)}
        self._keys: dict[str, tuple[IntArray, list[str]]] = {}
        self._memo: dict[Hashable, BoolArray] = {}
        self._per_node: dict[str, bool] = {}
        # per spread constraint and pod shape: its eligible nodes and their domain codes
        self.spread: dict[Hashable, tuple[BoolArray, IntArray]] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def values(self, key: str) -> tuple[IntArray, list[str]]:
        """Per node the code of its ``key`` label (-1 without it), and the codes' values."""
        found = self._keys.get(key)
        if found is None:
            codes = np.full(len(self.nodes), MISSING, dtype=np.int64)
            names: list[str] = []
            seen: dict[str, int] = {}
            for i, n in enumerate(self.nodes):
                v = n.labels.get(key)
                if v is not None:
                    code = seen.get(v)
                    if code is None:
                        code = seen[v] = len(names)
                        names.append(v)
                    codes[i] = code
            found = self._keys[key] = (codes, names)
        return found

    def per_node(self, key: str) -> bool:
        """Whether ``key`` names each node alone (every node has it, no two share it)."""
        found = self._per_node.get(key)
        if found is None:
            codes, names = self.values(key)
            found = self._per_node[key] = bool((codes != MISSING).all()) and len(names) == len(
                codes
            )
        return found

    def missing(self, key: str) -> BoolArray:
        """Nodes without the ``key`` label (memoized per key)."""
        found = self._memo.get(("missing", key))
        if found is None:
            found = self._memo[("missing", key)] = self.values(key)[0] == MISSING
        return found

    def positions(self, names: Iterable[str]) -> IntArray:
        """The named nodes' positions, -1 for a name not in the table (one C-level pass
        over the names: a gang placed pod by pod asks this for every pod)."""
        return np.fromiter(map(self.position.get, names, repeat(MISSING)), dtype=np.int64)

    def around(self, key: str, names: Iterable[str], but: str | None = None) -> BoolArray | None:
        """Nodes sharing a ``key`` value with one of the named nodes other than ``but``
        (a name not in the table, or a node without the label, reaches none); None when
        none is reached. One array look-up for all names, not a Python test per name."""
        at = self.positions(names)
        at = at[at != (MISSING if but is None else self.position.get(but, MISSING))]
        at = at[at != MISSING]
        if self.per_node(key):
            return self.in_domains(key, at) if len(at) else None  # codes are positions
        codes, _ = self.values(key)
        found = codes[at]
        found = found[found != MISSING]
        return self.in_domains(key, found) if len(found) else None

    def in_domains(self, key: str, domains: Iterable[int] | IntArray) -> BoolArray:
        """Nodes whose ``key`` value is one of the codes ``domains`` (a node without the
        label never): a lookup per node, or, when the key names each node alone (its
        codes are then the nodes' positions), the positions set directly."""
        wanted = domains if isinstance(domains, np.ndarray) else list(domains)
        if self.per_node(key):
            out = np.zeros(len(self.nodes), dtype=bool)
            out[wanted] = True
            return out
        codes, names = self.values(key)
        table = np.zeros(len(names) + 1, dtype=bool)  # the last slot: code -1, no label
        table[wanted] = True
        found: BoolArray = table[codes]
        return found

    def node_affinity(self, pod: Pod) -> BoolArray:
        """Nodes matching the pod's nodeSelector and required node affinity (memoized
        per distinct pair in the session)."""
        key = ("affinity", tuple(sorted(pod.node_selector.items())), pod.affinity_terms)
        found = self._memo.get(key)
        if found is None:
            found = np.fromiter(
                (_affine(pod, n) for n in self.nodes), dtype=bool, count=len(self.nodes)
            )
            self._memo[key] = found
        return found

    def tolerated(self, pod: Pod) -> BoolArray:
        """Nodes whose NoSchedule and NoExecute taints the pod tolerates."""
        key = ("taints", pod.tolerations)
        found = self._memo.get(key)
        if found is None:
            found = np.fromiter(
                (_tolerates(pod, n) for n in self.nodes), dtype=bool, count=len(self.nodes)
            )
            self._memo[key] = found
        return found


def _affine(pod: Pod, node: Node) -> bool:
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    terms = pod.affinity_terms
    return not terms or any(t.matches(node.name, labels) for t in terms)


_FILTERING = (TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE)


def _tolerates(pod: Pod, node: Node) -> bool:
    return all(
        any(tol.tolerates(t) for tol in pod.tolerations)
        for t in node.taints
        if t.effect in _FILTERING
    )


def _required_pair(term: PodAffinityTerm) -> tuple[str, str] | None:
    """One label pair a pod must carry to match ``term`` (its first matchLabels)."""
    sel = term.selector
    if sel is None or not sel.match_labels:
        return None
    return min(sel.match_labels.items())


def _drop(table: dict[Any, set[Any]], at: Any, key: Any) -> None:
    """Take ``key`` out of ``table[at]``, and the entry with its last key (so an index
    that gained and lost pods, as in a trial, is as it was)."""
    found = table.get(at)
    if found is not None:
        found.discard(key)
        if not found:
            del table[at]


@dataclass(slots=True)
class Placed:
    pod: Pod
    node: str  # the node's name (positions change when the index is rebuilt)


@dataclass(slots=True)
class PodIndex:
    """Pods holding nodes, by label pair, namespace and node; updated as pods are placed."""

    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    entries: dict[str, Placed] = field(default_factory=dict)
    by_label: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    by_namespace: dict[str, set[str]] = field(default_factory=dict)
    # required anti-affinity terms of placed pods, by term and the namespaces it reads:
    # per node, how many placed pods hold it (few distinct terms however many replicas)
    anti_terms: dict[Hashable, HeldTerm] = field(default_factory=dict)
    # the same terms by one label pair their selector requires (None: requires none)
    anti_by_label: dict[tuple[str, str] | None, set[Hashable]] = field(default_factory=dict)
    ports: dict[str, list[tuple[str, HostPort]]] = field(default_factory=dict)
    claim_users: dict[str, set[str]] = field(default_factory=dict)  # "ns/claim" -> pods
    soft: SoftTerms = field(default_factory=SoftTerms)  # terms that score others (held_terms)
    tallies: Tallies = field(default_factory=Tallies)  # matching pods per node, per selector
    version: int = 0  # moves with every pod added or removed (answers memoized over it)

    def add(self, pod: Pod, node: str) -> None:
        key = pod.key
        if key in self.entries:
            self.remove(key)
        self.version += 1
        self.entries[key] = Placed(pod, node)
        for pair in pod.meta.labels.items():
            self.by_label.setdefault(pair, set()).add(key)
        self.by_namespace.setdefault(pod.namespace, set()).add(key)
        self.tallies.add(pod, node)
        rules = pod.rules
        if rules is None:
            return
        self.soft.add(pod, node, self.namespaces_of)
        for t in rules.anti_affinity:
            spaces = self.namespaces_of(t, pod.namespace)
            k = term_key(t, spaces)
            held = self.anti_terms.get(k)
            if held is None:
                held = self.anti_terms[k] = HeldTerm(t, spaces, {})
                self.anti_by_label.setdefault(_required_pair(t), set()).add(k)
            held.nodes[node] = held.nodes.get(node, 0) + 1
        if rules.host_ports:
            self.ports.setdefault(node, []).extend((key, p) for p in rules.host_ports)
        for claim in rules.claims:
            self.claim_users.setdefault(f"{pod.namespace}/{claim}", set()).add(key)

    def remove(self, key: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        self.version += 1
        pod = entry.pod
        for pair in pod.meta.labels.items():
            _drop(self.by_label, pair, key)
        _drop(self.by_namespace, pod.namespace, key)
        self.tallies.remove(pod, entry.node)
        if pod.rules is not None:
            self.soft.remove(key)
            for t in pod.rules.anti_affinity:
                k = term_key(t, self.namespaces_of(t, pod.namespace))
                at = self.anti_terms[k].nodes
                at[entry.node] -= 1
                if not at[entry.node]:
                    del at[entry.node]
                if not at:
                    del self.anti_terms[k]
                    _drop(self.anti_by_label, _required_pair(t), k)
            used = self.ports.get(entry.node)
            if used:
                used[:] = [(k, p) for k, p in used if k != key]
                if not used:
                    del self.ports[entry.node]
            for claim in pod.rules.claims:
                _drop(self.claim_users, f"{pod.namespace}/{claim}", key)

    def copy(self, namespaces: Mapping[str, Mapping[str, str]]) -> PodIndex:
        """An index of its own over the same pods (``RulesBook.fork``)."""
        return PodIndex(
            namespaces=namespaces,
            entries=dict(self.entries),
            by_label={k: set(v) for k, v in self.by_label.items()},
            by_namespace={k: set(v) for k, v in self.by_namespace.items()},
            anti_terms={
                k: HeldTerm(h.term, h.spaces, dict(h.nodes)) for k, h in self.anti_terms.items()
            },
            anti_by_label={k: set(v) for k, v in self.anti_by_label.items()},
            ports={k: list(v) for k, v in self.ports.items()},
            claim_users={k: set(v) for k, v in self.claim_users.items()},
            soft=self.soft.copy(),
            tallies=self.tallies.copy(),
        )

    @classmethod
    def of(cls, pods: Iterable[Pod], namespaces: Mapping[str, Mapping[str, str]]) -> PodIndex:
        index = cls(namespaces=namespaces)
        for p in pods:
            if p.holds_resources:
                index.add(p, p.node_name)
        return index

    # -- selection ---------------------------------------------------------------------

    def anti_terms_for(self, labels: Mapping[str, str]) -> list[HeldTerm]:
        """The held anti-affinity terms a pod with ``labels`` could match: those whose
        required label pair it carries, and those requiring none (checked in full by
        the caller); not every term of every placed pod."""
        by = self.anti_by_label
        keys = set(by.get(None, ()))
        for pair in labels.items():
            keys |= by.get(pair, set())
        return [self.anti_terms[k] for k in keys]  # order-free: the caller ORs masks

    def namespaces_of(self, term: PodAffinityTerm, owner_namespace: str) -> frozenset[str] | None:
        """The namespaces ``term`` (of a pod in ``owner_namespace``) looks in; None: all."""
        if term.all_namespaces:
            return None
        names = set(term.namespaces)
        sel = term.namespace_selector
        if sel is not None:
            names.update(n for n, labels in self.namespaces.items() if sel.matches(labels))
        elif not names:
            names.add(owner_namespace)
        return frozenset(names)

    def tally(self, selector: LabelSelector, spaces: frozenset[str] | None) -> Mapping[str, int]:
        """Per node, the placed pods in ``spaces`` (None: any) that ``selector`` matches:
        counted by one walk the first time, then kept up to date (``tallies.py``)."""
        found = self.tallies.get(selector, spaces)
        if found is None:
            nodes: dict[str, int] = {}
            for entry in self.matching(selector, spaces):
                nodes[entry.node] = nodes.get(entry.node, 0) + 1
            found = Tally(selector, spaces, nodes)
            self.tallies.keep(found)
        return found.nodes

    def counted_at(
        self, pod: Pod, selector: LabelSelector, spaces: frozenset[str] | None
    ) -> str | None:
        """The node where ``tally(selector, spaces)`` counts ``pod`` itself (None: it does
        not), so an evaluation leaves the pod out of its own counts."""
        entry = self.entries.get(pod.key)
        if entry is None or not Tally(selector, spaces, {}).counts(entry.pod):
            return None
        return entry.node

    def matching(
        self, selector: LabelSelector | None, namespaces: frozenset[str] | None
    ) -> Iterator[Placed]:
        """Placed pods in ``namespaces`` (None: any) whose labels ``selector`` matches,
        looked up through the narrowest label pair the selector requires."""
        if selector is None:
            return
        keys = self._candidates(selector, namespaces)
        entries = self.entries
        for key in sorted(keys):
            entry = entries[key]
            pod = entry.pod
            if namespaces is not None and pod.namespace not in namespaces:
                continue
            if selector.matches(pod.meta.labels):
                yield entry

    def _candidates(self, selector: LabelSelector, namespaces: frozenset[str] | None) -> set[str]:
        options: list[set[str]] = [
            self.by_label.get(pair, set()) for pair in selector.match_labels.items()
        ]
        for r in selector.match_expressions:
            if r.operator is Operator.IN:
                union: set[str] = set()
                for v in r.values:
                    union |= self.by_label.get((r.key, v), set())
                options.append(union)
        if options:
            return min(options, key=len)  # the namespaces are checked per pod after
        if namespaces is not None:
            union = set()
            for ns in namespaces:
                union |= self.by_namespace.get(ns, set())
            return union
        return set(self.entries)
