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

import bisect
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

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
    """The node names, and a label index (built on first use) for label selectors.

    Most topologies name nodes exactly, so the label index, the costly part with the
    dozens of labels real nodes carry, is built only when a ``labelMatch`` asks for it.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.names: tuple[str, ...] = tuple(sorted(n.name for n in nodes))
        self.position: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self._nodes = nodes
        self._by_pair: dict[tuple[str, str], list[str]] | None = None

    @cached_property
    def labels(self) -> dict[str, Mapping[str, str]]:
        return {n.name: n.labels for n in self._nodes}

    def _pairs(self) -> dict[tuple[str, str], list[str]]:
        if self._by_pair is None:
            labels = self.labels
            self._by_pair = {}
            for name in self.names:
                for pair in labels[name].items():
                    self._by_pair.setdefault(pair, []).append(name)
        return self._by_pair

    def match_regex(self, pattern: str) -> list[str]:
        """Names ``pattern`` finds (unanchored RE2 search), in name order.

        Every name is searched unless the pattern starts with literal text every match
        must contain (``^gpu-rack1-``, ``node-1``, ``rack7-node-\\d+``): then only the
        names holding that text are searched: a bisection for an anchored prefix, one
        substring scan otherwise. The RE2 search still decides.
        """
        compiled = compile_pattern(pattern)
        if isinstance(compiled, str):
            return []  # reported while decoding; Volcano also yields an empty set
        search = compiled.search
        return [n for n in self._candidates(pattern) if search(n) is not None]

    def _candidates(self, pattern: str) -> Sequence[str]:
        literal, anchored = _required_literal(pattern)
        if not literal:
            return self.names
        if anchored:
            if ord(literal[-1]) >= sys.maxunicode:
                return self.names
            lo = bisect.bisect_left(self.names, literal)
            hi = bisect.bisect_left(self.names, literal[:-1] + chr(ord(literal[-1]) + 1), lo)
            return self.names[lo:hi]
        text, starts = self._joined
        if not text or _SEPARATOR in literal:
            return [n for n in self.names if literal in n]
        out: list[str] = []
        end = len(text)
        at = text.find(literal)
        while at >= 0:
            k = bisect.bisect_right(starts, at) - 1
            out.append(self.names[k])
            at = text.find(literal, starts[k + 1] if k + 1 < len(starts) else end)
        return out

    @cached_property
    def _joined(self) -> tuple[str, list[int]]:
        """All names in one string (and where each starts), for one-pass substring scans."""
        if any(_SEPARATOR in n for n in self.names):
            return "", []
        starts, at = [], 0
        for n in self.names:
            starts.append(at)
            at += len(n) + 1
        return _SEPARATOR.join(self.names), starts

    def match_labels(self, selector: LabelSelector) -> list[str]:
        if selector.empty:
            return []
        candidates: Sequence[str] = self.names
        by_pair = self._pairs()
        for pair in selector.match_labels.items():
            found = by_pair.get(pair, [])
            if len(found) < len(candidates):
                candidates = found
        labels = self.labels
        return [n for n in candidates if selector.matches(labels[n])]


_META = frozenset("\\.^$|?*+()[]{}")
_SEPARATOR = "\x00"


def _required_literal(pattern: str) -> tuple[str, bool]:
    """Literal text every match of ``pattern`` contains, and whether it starts the name.

    The leading run of plain characters, after an optional ``^``: ``^gpu-rack1-`` yields
    ``("gpu-rack1-", True)``, ``node-1`` yields ``("node-1", False)``. A quantifier after
    the run's last character (``ab?``, ``ab*``, ``ab{0,2}``) makes that character
    optional, so it is dropped. Any ``|`` (an alternative need not contain the run)
    yields ``""``, and so does anything else unusual: the caller then searches every name.
    """
    if "|" in pattern:
        return "", False
    anchored = pattern.startswith("^")
    out: list[str] = []
    for ch in pattern[1:] if anchored else pattern:
        if ch in _META:
            if ch in "?*{" and out:
                out.pop()  # the previous character may be absent
            break
        out.append(ch)
    return "".join(out), anchored


def resolve(hn: HyperNode, catalog: NodeCatalog) -> Resolved:
    nodes: set[str] = set()
    missing: set[str] = set()
    children: list[str] = []
    known = catalog.position
    for member in hn.members:
        sel = member.selector
        exact = sel.exact
        if member.type is MemberType.HYPERNODE:
            if exact is not None:
                children.append(exact)
        elif exact is not None:
            if exact in known:
                nodes.add(exact)
            else:
                missing.add(exact)
        elif sel.regex is not None:
            nodes.update(catalog.match_regex(sel.regex))
        elif sel.labels is not None:
            nodes.update(catalog.match_labels(sel.labels))
    return Resolved(tuple(sorted(nodes)), tuple(sorted(missing)), tuple(children))
