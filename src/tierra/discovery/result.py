"""What every source returns, and how sources complain about their input.

A source is a pure function from its input (files, typed objects, a REST response)
to a ``Discovery``: the desired HyperNodes, per-node topologies for the intra-node
sources, link problems for the fabric sources, and notes. Nothing is written anywhere;
``reconcile`` turns a desired set into a plan and an adapter applies it.

Unreadable input raises ``ParseError`` naming the file and the line, and the source
produces nothing: half a fabric is worse than none, because the reconciler would
delete every HyperNode the missing half described.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tierra.api.hypernode import MANAGED_BY as _MANAGED_BY
from tierra.api.hypernode import HyperNode, LinkSpec, Member, MemberSelector, MemberType
from tierra.api.meta import ObjectMeta
from tierra.discovery.nodetopology import NodeTopology
from tierra.errors import InputError, Problem, Severity

MANAGED_BY = _MANAGED_BY
"""Ownership label: the reconciler only ever changes objects carrying it with its value
(defined in ``api.hypernode``, where the topology index reads it to know a mirror)."""
TOPOLOGY_LABEL = "topology.tierra.dev/topology"
"""Which topology (label type, Slurm topology, fabric) a discovered HyperNode belongs to."""
SOURCE_NAME = "topology.tierra.dev/source-name"
"""Annotation: what the source itself calls this domain (a switch, a block), for round trips."""
SOURCE_DETAIL = "topology.tierra.dev/source-detail"
"""Annotation: how the domain was found (the label path, the switches in a leaf group)."""


class ParseError(InputError):
    """The input cannot be read; names the file and line so the user can look."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        self.file = file
        self.line = line
        where = f"{file}: line {line}" if line is not None else file
        super().__init__(Problem(f"{where}: {message}"))


class LinkState(enum.StrEnum):
    DEGRADED = "degraded"
    DOWN = "down"


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkIssue:
    """One link running below the fabric's norm, or down, located in the input."""

    state: LinkState
    a: str  # "lg01-01 port 12"
    b: str  # "luna-0001 (mlx5_0)" or "" when the peer is unknown
    detail: str  # "1xHDR where the norm is 4xHDR"
    where: str  # "line 1234" / "ports[17]"
    hypernode: str | None = None  # the lowest discovered HyperNode holding the link
    hosts: tuple[str, ...] = ()  # hosts (nodes) on this link

    def __str__(self) -> str:
        peer = f" - {self.b}" if self.b else ""
        return f"{self.state} link {self.a}{peer}: {self.detail} ({self.where})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """The desired state one source found. ``owner`` is the value of ``MANAGED_BY``."""

    source: str
    owner: str
    hypernodes: tuple[HyperNode, ...] = ()
    node_topologies: tuple[NodeTopology, ...] = ()
    link_issues: tuple[LinkIssue, ...] = ()
    notes: tuple[Problem, ...] = ()
    summary: Mapping[str, int] = field(default_factory=dict)


def note(message: str) -> Problem:
    return Problem(message, severity=Severity.WARNING)


def hypernode(
    name: str,
    *,
    tier: int,
    nodes: Iterable[str] = (),
    children: Iterable[str] = (),
    owner: str,
    topology: str | None = None,
    tier_name: str | None = None,
    link: LinkSpec | None = None,
    annotations: Mapping[str, str] | None = None,
) -> HyperNode:
    """A discovered HyperNode: exact members sorted (children first), ownership stamped."""
    members = [Member(MemberType.HYPERNODE, MemberSelector(exact=c)) for c in sorted(set(children))]
    members += [Member(MemberType.NODE, MemberSelector(exact=n)) for n in sorted(set(nodes))]
    labels = {MANAGED_BY: owner}
    if topology:
        labels[TOPOLOGY_LABEL] = topology
    return HyperNode(
        meta=ObjectMeta(name=name, labels=labels, annotations=dict(annotations or {})),
        tier=tier,
        tier_name=tier_name,
        members=tuple(members),
        link=link,
    )


def sorted_hypernodes(hns: Sequence[HyperNode]) -> tuple[HyperNode, ...]:
    """Lowest tier first, then by name: the order every source prints in."""
    return tuple(sorted(hns, key=lambda h: (h.tier, h.name)))
