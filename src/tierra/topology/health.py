"""Health roll-ups: which HyperNodes are degraded, and why, in one rule for every reader.

A domain is degraded when a node under it is NotReady, cordoned or tainted NoExecute
(counted per domain from the nodes, updated when one node changes), or when a link
inside it has a problem (read from HyperNode status, see ``link_problem``). A link
problem counts for the HyperNode reporting it and every HyperNode above it (not the
virtual root). The scheduler avoids degraded domains for new gangs, ``tierra tree``
marks them, and explain prints ``describe``: all three read this class.

The rule for one node (``node_issues``) and its words (``ISSUE_WORDS``, ``node_state``,
``node_reasons``) live here too, so the dashboard, the HyperNode status the controller
writes and explain cannot disagree about what makes a node unhealthy or what to call it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tierra.api.hypernode import HyperNode
from tierra.api.node import Node
from tierra.topology.index import IntArray, TopologyIndex

LINK_CONDITIONS = ("NetworkUnavailable", "SystemFailure")


class NodeIssue(enum.IntEnum):
    NOT_READY = 0
    CORDONED = 1
    NO_EXECUTE = 2


ISSUE_WORDS = {
    NodeIssue.NOT_READY: "NotReady",
    NodeIssue.CORDONED: "cordoned",
    NodeIssue.NO_EXECUTE: "NoExecute",
}
"""How explain, ``tierra tree`` and the dashboard name each issue."""

ISSUE_REASONS = {
    NodeIssue.NOT_READY: "NotReady",
    NodeIssue.CORDONED: "Cordoned",
    NodeIssue.NO_EXECUTE: "NoExecute",
}
"""The same issues as API reasons (CamelCase), in a HyperNode's ``unhealthyNodes``."""

WORST_FIRST = (NodeIssue.NOT_READY, NodeIssue.NO_EXECUTE, NodeIssue.CORDONED)
"""NotReady before NoExecute before cordoned: what one word for a node names first."""


def node_flags(node: Node) -> tuple[bool, bool, bool]:
    """The rule: a node is unhealthy when NotReady, cordoned or tainted NoExecute.

    Indexed by ``NodeIssue``; every reader of node health goes through this."""
    return (not node.ready, node.unschedulable, node.no_execute)


def node_issues(node: Node) -> IntArray:
    return np.array(node_flags(node), dtype=np.int64)


def node_state(node: Node) -> str:
    """One word for a node's health, its worst issue ("Ready" when it has none)."""
    flags = node_flags(node)
    return next((ISSUE_WORDS[i] for i in WORST_FIRST if flags[i]), "Ready")


def node_reasons(node: Node) -> list[str]:
    """A node's issues as API reasons, in ``NodeIssue`` order (empty when healthy)."""
    return [ISSUE_REASONS[i] for i, bad in zip(NodeIssue, node_flags(node), strict=True) if bad]


class Health:
    def __init__(self, index: TopologyIndex, nodes: Sequence[Node]) -> None:
        self.index = index
        self.node_flags: IntArray = np.zeros(
            (len(index.node_names), len(NodeIssue)), dtype=np.int64
        )
        if nodes:
            at = [index.node_ix[n.name] for n in nodes]
            flags = [node_flags(n) for n in nodes]
            self.node_flags[at] = np.array(flags, dtype=np.int64)
        self.counts: IntArray = index.sum_under(self.node_flags)
        unhealthy: IntArray = np.asarray(self.node_flags.any(axis=1), dtype=np.int64)
        self.unhealthy_nodes: IntArray = index.sum_under(unhealthy)
        self.link_issues: tuple[str, ...] = _link_issues(index)
        self.link_bad: npt.NDArray[np.bool_] = np.array(
            [bool(t) for t in self.link_issues], dtype=bool
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
        return bool(self.unhealthy_nodes[h] > 0) or bool(self.link_bad[h])

    def degraded_domains(self, domains: IntArray) -> npt.NDArray[np.bool_]:
        """``degraded`` for many domains at once."""
        return np.asarray((self.unhealthy_nodes[domains] > 0) | self.link_bad[domains], dtype=bool)

    def node_healthy(self, n: int) -> bool:
        return not self.node_flags[n].any()

    def describe(self, h: int) -> str:
        c = [int(x) for x in self.counts[h]]
        parts = [f"{c[i]} {ISSUE_WORDS[i]}" for i in NodeIssue if c[i]]
        if self.link_issues[h]:
            parts.append(self.link_issues[h])
        return ", ".join(parts)


def link_problem(hn: HyperNode) -> str:
    """What a HyperNode's own status says is wrong with its links ("" when nothing).

    Link state is not on Node objects. tierra's fabric sources (ibnetdiscover, UFM)
    write ``Degraded=True`` with a ``Links*`` reason; Volcano's proposed conditions
    (apis PR #155) are ``NetworkUnavailable=True`` and ``SystemFailure=True``.
    """
    for c in hn.status.conditions:
        if c.status != "True":
            continue
        if c.type == "Degraded" and "Link" in c.reason:
            links = [part for part in c.message.split("; ") if part.startswith("links:")]
            return links[0] if links else "links degraded"
        if c.type in LINK_CONDITIONS:
            return f"{c.type} ({c.reason})" if c.reason else c.type
    return ""


def _link_issues(index: TopologyIndex) -> tuple[str, ...]:
    """Per domain (root last, always ""), its link problem: its own, else the first one
    below it (by name), prefixed with the HyperNode that reports it."""
    own = [link_problem(hn) for hn in index.hypernodes]
    out = [*own, ""]
    for h, text in enumerate(own):
        if text:
            for a in index.ancestors(h)[1:-1]:  # not h itself, not the virtual root
                if not out[a]:
                    out[a] = f"{index.names[h]}: {text}"
    return tuple(out)
