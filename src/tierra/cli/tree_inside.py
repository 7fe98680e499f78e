"""``tierra tree --inside``: each node's inside below it, as the allocator reads it.

The domains of one node (``tierra.topology.inside``: NVLink islands, PCIe switches and
bridges, host bridges, PCIe roots, NUMA nodes, from DRA slices and nvidia-smi) are
drawn nested where one holds another's devices (a NUMA node over its PCIe roots, a root
over a switch), each with its devices; domains no other holds sit right under the node.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.tree import Tree as RichTree

from tierra.api.snapshot import Snapshot
from tierra.topology.inside import LEVELS, InsideDomain, InsideIndex, NodeInside

SHOWN = 8  # device names listed per domain; more are counted


def index_of(snapshot: Snapshot) -> InsideIndex:
    return InsideIndex(snapshot.resource_slices, snapshot.nodes)


def add_inside(branch: RichTree, inside: NodeInside) -> None:
    """The node's domains under its line, nested by containment."""
    names = {d.key: d.name for d in inside.devices}
    placed: list[tuple[InsideDomain, RichTree]] = []
    slow_first = sorted(inside.domains, key=lambda d: -LEVELS.index(d.level))
    for d in slow_first:
        members = set(d.devices)
        holders = [
            (p, t)
            for p, t in placed
            if set(p.devices) >= members and LEVELS.index(p.level) > LEVELS.index(d.level)
        ]
        parent = min(holders, key=lambda pt: len(pt[0].devices))[1] if holders else branch
        placed.append((d, parent.add(_label(d, names))))
    if inside.clique is not None:
        branch.add(f"[dim]NVLink clique {escape(inside.clique)}[/dim]")


def _label(d: InsideDomain, names: dict[Any, str]) -> str:
    devices = [names.get(k, "/".join(k)) for k in d.devices]
    shown = ", ".join(devices[:SHOWN]) + (
        f", +{len(devices) - SHOWN}" if len(devices) > SHOWN else ""
    )
    link = f" {d.link}" if d.link else ""
    source = "" if d.source == "dra" else f" [dim]({escape(d.source)})[/dim]"
    return f"[cyan]{escape(d.level)}[/cyan] {escape(d.name)}{link}: {escape(shown)}{source}"


def inside_json(index: InsideIndex, nodes: list[str]) -> dict[str, Any]:
    """Per node of ``nodes`` with an inside, its document."""
    out: dict[str, Any] = {}
    for name in nodes:
        inside = index.node(name)
        if not inside.empty:
            out[name] = inside.to_dict()
    return out
