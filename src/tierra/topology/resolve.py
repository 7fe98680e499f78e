"""Member resolution with Volcano's exact semantics.

* ``exactMatch`` on a Node member names the node even if it does not exist: it counts
  toward the node count, and the scheduler simply has no capacity for it.
* ``regexMatch`` is an *unanchored* RE2 search over node names (``node-1`` matches
  ``node-10``), as Go's ``regexp.MatchString`` is.
* ``labelMatch`` with neither labels nor expressions matches nothing, not everything.
* HyperNode members are exact names only; other selectors on them are ignored here
  (decoding already reported them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tierra.api.hypernode import HyperNode, MemberType
from tierra.api.labels import LabelSelector
from tierra.api.node import Node
from tierra.api.regex import compile_pattern


@dataclass(frozen=True, slots=True)
class Resolved:
    """What one HyperNode's members name, split by what exists."""

    nodes: tuple[str, ...]  # existing nodes, sorted
    missing_nodes: tuple[
        str, ...
    ]  # exact Node names with no Node object (counted, not schedulable)
    hypernodes: tuple[str, ...]  # child HyperNode names as written, in member order


class NodeCatalog:
    """The node names and a label index, so label selectors need not scan every node."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.names: tuple[str, ...] = tuple(sorted(n.name for n in nodes))
        self.labels: dict[str, Mapping[str, str]] = {n.name: n.labels for n in nodes}
        self._by_pair: dict[tuple[str, str], list[str]] = {}
        self._by_key: dict[str, list[str]] = {}
        for name in self.names:
            for k, v in self.labels[name].items():
                self._by_pair.setdefault((k, v), []).append(name)
                self._by_key.setdefault(k, []).append(name)

    def match_regex(self, pattern: str) -> list[str]:
        compiled = compile_pattern(pattern)
        if isinstance(compiled, str):
            return []  # reported while decoding; Volcano also yields an empty set
        search = compiled.search
        return [n for n in self.names if search(n) is not None]

    def match_labels(self, selector: LabelSelector) -> list[str]:
        if selector.empty:
            return []
        candidates: Sequence[str] = self.names
        for pair in selector.match_labels.items():
            found = self._by_pair.get(pair, [])
            if len(found) < len(candidates):
                candidates = found
        return [n for n in candidates if selector.matches(self.labels[n])]


def resolve(hn: HyperNode, catalog: NodeCatalog) -> Resolved:
    nodes: set[str] = set()
    missing: set[str] = set()
    children: list[str] = []
    for member in hn.members:
        sel = member.selector
        if member.type is MemberType.HYPERNODE:
            if sel.exact is not None:
                children.append(sel.exact)
            continue
        if sel.exact is not None:
            (nodes if sel.exact in catalog.labels else missing).add(sel.exact)
        elif sel.regex is not None:
            nodes.update(catalog.match_regex(sel.regex))
        elif sel.labels is not None:
            nodes.update(catalog.match_labels(sel.labels))
    return Resolved(tuple(sorted(nodes)), tuple(sorted(missing)), tuple(children))
