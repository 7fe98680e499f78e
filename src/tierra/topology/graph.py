"""Graph rules Volcano does not check: parents, cycles, tier order, overlaps, tier names.

Volcano accepts any set of HyperNodes and, at run time, flips one global flag when it
finds a cycle or a second parent, which blocks every topology-constrained job in the
cluster. tierra checks the whole graph up front, names each problem's object and field,
and marks only the *tree* (connected component) involved as unusable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tierra.api.hypernode import HyperNode, MemberType
from tierra.errors import Problem, Severity
from tierra.topology.resolve import Resolved

Reporter = Callable[[HyperNode, str, str], None]


@dataclass(slots=True)
class GraphCheck:
    """The outcome of checking the HyperNode graph."""

    parent: dict[str, str] = field(default_factory=dict)  # child -> its one parent
    component: dict[str, int] = field(default_factory=dict)  # HyperNode -> component id
    bad: dict[int, list[str]] = field(default_factory=dict)  # component -> reasons
    problems: list[Problem] = field(default_factory=list)


class _UnionFind:
    def __init__(self, names: Sequence[str]) -> None:
        self.up = {n: n for n in names}

    def find(self, x: str) -> str:
        root = x
        while self.up[root] != root:
            root = self.up[root]
        while self.up[x] != root:
            self.up[x], x = root, self.up[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.up[max(ra, rb)] = min(ra, rb)


def _child_members(hn: HyperNode) -> list[tuple[int, str]]:
    return [
        (i, m.selector.exact)
        for i, m in enumerate(hn.members)
        if m.type is MemberType.HYPERNODE and m.selector.exact is not None
    ]


def check_graph(
    hypernodes: Mapping[str, HyperNode],
    resolved: Mapping[str, Resolved],
    invalid: Mapping[str, list[str]],
) -> GraphCheck:
    """Check every rule, collecting all problems; ``invalid`` are schema-broken HyperNodes."""
    out = GraphCheck()
    names = sorted(hypernodes)
    uf = _UnionFind(names)
    flagged: dict[str, list[str]] = defaultdict(list)  # HyperNode -> reasons its tree is bad

    def report(hn: HyperNode, path: str, message: str) -> None:
        out.problems.append(Problem(message, hn.origin, hn.ref, path, group=hn.group))
        flagged[hn.name].append(f"{hn.ref}: {message}")

    claims, edges = _edges(hypernodes, names, uf, out, report)
    for child, parents in sorted(claims.items()):
        if len(parents) > 1:
            listing = ", ".join(f"HyperNode/{p}" for p, _ in parents)
            for p, i in parents[1:]:
                report(
                    hypernodes[p],
                    f"spec.members[{i}].selector.exactMatch.name",
                    f"HyperNode/{child} already has a parent; it is claimed by {listing}, "
                    "and a HyperNode may have only one parent",
                )
        out.parent[child] = parents[0][0]

    _report_cycles(hypernodes, names, edges, report)

    comp_ids: dict[str, int] = {}
    for name in names:
        root = uf.find(name)
        out.component[name] = comp_ids.setdefault(root, len(comp_ids))

    members_of: dict[int, list[str]] = defaultdict(list)
    for name in names:
        members_of[out.component[name]].append(name)

    for members in members_of.values():
        _check_overlaps(members, hypernodes, resolved, report)
        _check_tier_names(members, hypernodes, report)

    for name, reasons in invalid.items():
        if name in out.component:
            flagged[name].extend(reasons)
    for name, reasons in flagged.items():
        out.bad.setdefault(out.component[name], []).extend(reasons)
    return out


def _edges(
    hypernodes: Mapping[str, HyperNode],
    names: Sequence[str],
    uf: _UnionFind,
    out: GraphCheck,
    report: Reporter,
) -> tuple[dict[str, list[tuple[str, int]]], dict[str, list[str]]]:
    """Parent claims on each child (parent, member index) and the child edges, joining
    ``uf``'s components; a missing child is a warning, a tier not above a child's an error."""
    claims: dict[str, list[tuple[str, int]]] = defaultdict(list)
    edges: dict[str, list[str]] = defaultdict(list)
    for name in names:
        hn = hypernodes[name]
        seen_children: set[str] = set()
        for i, child in _child_members(hn):
            path = f"spec.members[{i}].selector.exactMatch.name"
            if child not in hypernodes:
                out.problems.append(
                    Problem(
                        f"HyperNode/{child} does not exist (yet); ignored until it does",
                        hn.origin,
                        hn.ref,
                        path,
                        Severity.WARNING,
                        hn.group,
                    )
                )
                continue
            if child in seen_children:
                continue
            seen_children.add(child)
            claims[child].append((name, i))
            edges[name].append(child)
            uf.union(name, child)
            if child == name:
                continue  # reported as a cycle below
            if hn.tier >= 0 and hypernodes[child].tier >= 0 and hn.tier <= hypernodes[child].tier:
                report(
                    hn,
                    path,
                    f"tier {hn.tier} must be above its child HyperNode/{child}'s tier "
                    f"{hypernodes[child].tier} (smaller tier = faster links)",
                )
    return claims, edges


def _report_cycles(
    hypernodes: Mapping[str, HyperNode],
    names: Sequence[str],
    edges: Mapping[str, list[str]],
    report: Reporter,
) -> None:
    for cycle in _cycles(names, edges):
        loop = " -> ".join(f"HyperNode/{c}" for c in [*cycle, cycle[0]])
        first = hypernodes[cycle[0]]
        i = next(
            (
                i
                for i, c in _child_members(first)
                if c == (cycle[1] if len(cycle) > 1 else cycle[0])
            ),
            0,
        )
        report(
            first,
            f"spec.members[{i}].selector.exactMatch.name",
            f"membership forms a cycle: {loop}",
        )


def _cycles(names: Sequence[str], edges: Mapping[str, list[str]]) -> list[list[str]]:
    """Every elementary cycle found by one DFS (one per back edge), deterministic order."""
    color: dict[str, int] = dict.fromkeys(names, 0)
    found: list[list[str]] = []
    for start in names:
        if color[start]:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        color[start] = 1
        while stack:
            node, i = stack[-1]
            children = edges.get(node, [])
            if i < len(children):
                stack[-1] = (node, i + 1)
                child = children[i]
                if color[child] == 0:
                    color[child] = 1
                    stack.append((child, 0))
                    path.append(child)
                elif color[child] == 1:
                    found.append(path[path.index(child) :])
            else:
                color[node] = 2
                stack.pop()
                path.pop()
    return found


def _check_overlaps(
    members: list[str],
    hypernodes: Mapping[str, HyperNode],
    resolved: Mapping[str, Resolved],
    report: Reporter,
) -> None:
    holders: dict[str, list[str]] = defaultdict(list)
    for name in members:
        for node in (*resolved[name].nodes, *resolved[name].missing_nodes):
            holders[node].append(name)
    for node, hs in sorted(holders.items()):
        if len(hs) > 1:
            second = hypernodes[hs[1]]
            report(
                second,
                "spec.members",
                f"node {node} is also a member of HyperNode/{hs[0]} in the same tree; "
                "a node belongs to at most one HyperNode per tree",
            )


def _check_tier_names(
    members: list[str], hypernodes: Mapping[str, HyperNode], report: Reporter
) -> None:
    first: dict[str, HyperNode] = {}
    for name in members:
        hn = hypernodes[name]
        if not hn.tier_name or hn.tier < 0:
            continue
        seen = first.setdefault(hn.tier_name, hn)
        if seen.tier != hn.tier:
            report(
                hn,
                "spec.tierName",
                f"tierName {hn.tier_name!r} means tier {seen.tier} in HyperNode/{seen.name} "
                f"but tier {hn.tier} here; one name must mean one tier within a tree",
            )
