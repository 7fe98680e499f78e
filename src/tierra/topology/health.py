"""Health roll-ups: how many nodes under each HyperNode are NotReady, cordoned or NoExecute.

The scheduler avoids degraded domains for new gangs and ``tierra tree`` marks them; both
read these counts instead of walking nodes. Counts update when one node changes.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.topology.index import IntArray, TopologyIndex


class NodeIssue(enum.IntEnum):
    NOT_READY = 0
    CORDONED = 1
    NO_EXECUTE = 2


def node_issues(node: Node) -> IntArray:
    return np.array([not node.ready, node.unschedulable, node.no_execute], dtype=np.int64)


class Health:
    def __init__(self, index: TopologyIndex, nodes: Sequence[Node]) -> None:
        self.index = index
        self.node_flags: IntArray = np.zeros(
            (len(index.node_names), len(NodeIssue)), dtype=np.int64
        )
        if nodes:
            at = [index.node_ix[n.name] for n in nodes]
            flags = [(not n.ready, n.unschedulable, n.no_execute) for n in nodes]
            self.node_flags[at] = np.array(flags, dtype=np.int64)
        self.counts: IntArray = index.sum_under(self.node_flags)
        unhealthy: IntArray = np.asarray(self.node_flags.any(axis=1), dtype=np.int64)
        self.unhealthy_nodes: IntArray = index.sum_under(unhealthy)
        # Link state is not on Node objects: the fabric sources (ibnetdiscover, UFM) write
        # it into HyperNode status as Degraded=True with a Links* reason, already rolled
        # up to every HyperNode above the bad link.
        self.link_issues: tuple[str, ...] = (
            *(_link_issue(h) for h in index.hypernodes),
            "",
        )

    def update(self, node: Node) -> bool:
        """Apply one node's new state; False when the index does not know the node.

        A node added after the index was built belongs to no HyperNode until the index
        is rebuilt, so there is nothing to roll up here yet.
        """
        n = self.index.node_ix.get(node.name)
        if n is None:
            return False
        new = node_issues(node)
        delta = new - self.node_flags[n]
        if not delta.any():
            return True
        domains = self.index.domains_of(n)
        self.counts[domains] += delta
        self.unhealthy_nodes[domains] += int(new.any()) - int(self.node_flags[n].any())
        self.node_flags[n] = new
        return True

    def degraded(self, h: int) -> bool:
        """A node inside is unhealthy, or a fabric link inside is degraded or down."""
        return bool(self.unhealthy_nodes[h] > 0) or bool(self.link_issues[h])

    def node_healthy(self, n: int) -> bool:
        return not self.node_flags[n].any()

    def describe(self, h: int) -> str:
        c = [int(x) for x in self.counts[h]]
        parts = []
        if c[NodeIssue.NOT_READY]:
            parts.append(f"{c[NodeIssue.NOT_READY]} NotReady")
        if c[NodeIssue.CORDONED]:
            parts.append(f"{c[NodeIssue.CORDONED]} cordoned")
        if c[NodeIssue.NO_EXECUTE]:
            parts.append(f"{c[NodeIssue.NO_EXECUTE]} NoExecute")
        if self.link_issues[h]:
            parts.append(self.link_issues[h])
        return ", ".join(parts)


def _link_issue(hn: HyperNode) -> str:
    for c in hn.status.conditions:
        if c.type == "Degraded" and c.status == "True" and "Link" in c.reason:
            links = [part for part in c.message.split("; ") if part.startswith("links:")]
            return links[0] if links else "links degraded"
    return ""
