"""HyperNode status from node health and link state: ``Ready``, ``Degraded``, unhealthy nodes.

Per HyperNode (members resolved recursively with Volcano's semantics, through
``TopologyIndex``):

* ``status.nodeCount``: the distinct nodes inside, exact Node members without a Node
  object included (as Volcano counts them).
* ``status.unhealthyNodes``: every node inside that is NotReady, cordoned
  (``spec.unschedulable``), tainted ``NoExecute``, or on a degraded or down fabric link;
  the reason lists each (``NotReady,Cordoned``), at most ``MAX_LISTED`` entries.
* ``Ready``: ``True`` while at least one node inside is healthy and the tree is usable;
  ``False`` with ``NoHealthyNodes`` or ``InvalidTopology``; ``Unknown`` with
  ``NoNodeData`` when none of its nodes has a Node object (fabric discovery run offline).
* ``Degraded``: ``True`` when a node inside is unhealthy or a link inside is degraded or
  down (reason ``NodesUnhealthy``, ``LinksDegraded`` or ``NodesUnhealthyAndLinksDegraded``,
  message with the counts), else ``False`` with ``AllHealthy``.

A link problem counts for the lowest HyperNode holding the link and every HyperNode above
it; the hosts on a bad host link are also listed as unhealthy nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from tierra.api.hypernode import HyperNode, HyperNodeStatus, UnhealthyNode
from tierra.api.node import Condition, Node
from tierra.discovery.result import LinkIssue, LinkState
from tierra.topology.health import node_reasons
from tierra.topology.index import TopologyIndex

MAX_LISTED = 256
READY = "Ready"
DEGRADED = "Degraded"


def rollup(
    hypernodes: Sequence[HyperNode],
    nodes: Sequence[Node] = (),
    link_issues: Sequence[LinkIssue] = (),
) -> tuple[HyperNode, ...]:
    """``hypernodes`` with their status computed (same order)."""
    index = TopologyIndex.build(nodes, hypernodes)
    node_by_name = {n.name: n for n in nodes}
    reasons: dict[str, list[str]] = {n.name: r for n in nodes if (r := node_reasons(n))}
    link_hosts: dict[str, set[str]] = defaultdict(set)
    links_at: dict[str, list[LinkIssue]] = defaultdict(list)
    for issue in link_issues:
        link_reason = "LinkDown" if issue.state is LinkState.DOWN else "LinkDegraded"
        for host in issue.hosts:
            link_hosts[host].add(link_reason)
        if issue.hypernode is not None and issue.hypernode in index.ix:
            for h in index.ancestors(index.ix[issue.hypernode]):
                if h != index.root:
                    links_at[index.names[h]].append(issue)
    out: list[HyperNode] = []
    for hn in hypernodes:
        h = index.ix[hn.name]
        inside = index.nodes_under(h)
        missing = index.missing_nodes[h]
        unhealthy: list[UnhealthyNode] = []
        for member in sorted({*inside, *missing}):
            why = [*reasons.get(member, ()), *sorted(link_hosts.get(member, ()))]
            if why:
                unhealthy.append(UnhealthyNode(member, ",".join(why)))
        known = [n for n in inside if n in node_by_name]
        healthy = sum(1 for n in known if n not in reasons and n not in link_hosts)
        issues = links_at.get(hn.name, [])
        total = int(index.node_counts[h])
        ready = _ready(index, h, len(known), healthy)
        degraded = _degraded(unhealthy, issues, total)
        if len(unhealthy) > MAX_LISTED:
            unhealthy = unhealthy[:MAX_LISTED]
        status = HyperNodeStatus(
            node_count=total, conditions=(ready, degraded), unhealthy_nodes=tuple(unhealthy)
        )
        out.append(replace(hn, status=status))
    return tuple(out)


def _ready(index: TopologyIndex, h: int, known: int, healthy: int) -> Condition:
    """``Ready``: the tree usable and a healthy node inside (Unknown with no Node data)."""
    if not index.usable[h]:
        tree = index.trees[int(index.tree_of[h])]
        return Condition(READY, "False", "InvalidTopology", "; ".join(tree.reasons)[:1024])
    if not known:
        return Condition(READY, "Unknown", "NoNodeData", "no Node object for any member")
    if healthy == 0:
        return Condition(READY, "False", "NoHealthyNodes", f"0 of {known} nodes healthy")
    return Condition(READY, "True", "HealthyNodesAvailable", f"{healthy} of {known} nodes healthy")


def _degraded(
    unhealthy: Sequence[UnhealthyNode], issues: Sequence[LinkIssue], total: int
) -> Condition:
    """``Degraded``: which nodes are unhealthy and why, and which links are bad."""
    parts: list[str] = []
    if unhealthy:
        counts: dict[str, int] = defaultdict(int)
        for u in unhealthy:
            for why_one in u.reason.split(","):
                counts[why_one] += 1
        detail = ", ".join(f"{c} {w}" for w, c in sorted(counts.items()))
        parts.append(f"{len(unhealthy)} of {total} nodes unhealthy ({detail})")
    if issues:
        degraded_links = sum(1 for i in issues if i.state is LinkState.DEGRADED)
        down_links = len(issues) - degraded_links
        link_text = []
        if degraded_links:
            link_text.append(f"{degraded_links} degraded")
        if down_links:
            link_text.append(f"{down_links} down")
        parts.append(f"links: {', '.join(link_text)} (first: {issues[0]})")
    if unhealthy and issues:
        reason = "NodesUnhealthyAndLinksDegraded"
    elif unhealthy:
        reason = "NodesUnhealthy"
    elif issues:
        reason = "LinksDegraded"
    else:
        reason = "AllHealthy"
    return Condition(
        DEGRADED,
        "True" if parts else "False",
        reason,
        "; ".join(parts)[:32768] if parts else "no unhealthy node or link",
    )
