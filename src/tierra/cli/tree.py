"""``tierra tree``: the topology forest as a person reads it, or as JSON.

Each HyperNode line carries its tier and tier name, how many nodes it holds, free and
allocatable GPUs and CPU (bound pods in the snapshot already subtracted; what sits on a
NotReady, cordoned or NoExecute node shown as unavailable, not free), and health.
Unusable trees are shown with the reasons, so a broken topology is never silent.
A HyperNode is (API group, name): a name both groups hold is shown ``group/name``, and
the controller's Volcano copies of tierra's HyperNodes are set aside and said so (one
topology, scheduled by tierra's group). The JSON gives each HyperNode's ``name`` and
``group`` apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.markup import escape
from rich.tree import Tree as RichTree

from tierra.api.quantity import format_milli
from tierra.cli.common import (
    AnyOutput,
    Output,
    console,
    load_snapshot_or_exit,
    print_document,
    print_problems,
)
from tierra.cli.tree_inside import add_inside, index_of, inside_json
from tierra.topology.capacity import Capacity
from tierra.topology.health import Health
from tierra.topology.index import TopologyIndex
from tierra.topology.inside import InsideIndex

GPU = "nvidia.com/gpu"


def _people(milli: int) -> str:
    """``12,288`` for whole units (a person counts digits badly), else ``3.5``."""
    return f"{milli // 1000:,}" if milli % 1000 == 0 else format_milli(milli)


class _View:
    """What ``tree`` says about each domain: counts, what is free, what cannot be used.

    Free means usable now: GPUs and CPU on a NotReady, cordoned or NoExecute-tainted node
    are *unavailable*, not free, since the scheduler will place nothing there. Node counts
    are the nodes in the snapshot; members naming a node the snapshot lacks are counted
    apart (missing), so the root (every node) is never smaller than a domain under it.
    """

    def __init__(
        self,
        index: TopologyIndex,
        capacity: Capacity,
        health: Health,
        inside: InsideIndex | None = None,
    ) -> None:
        self.index, self.capacity, self.health = index, capacity, health
        self.inside = inside  # --inside: each node's inside (tree_inside.py)
        healthy = np.asarray(~self.health.node_flags.any(axis=1), dtype=bool)
        left = np.maximum(capacity.node_alloc - capacity.node_used, 0)
        self.unavailable = index.sum_under(np.where(healthy[:, None], 0, left))
        self.nodes = np.diff(index.real_ptr)
        self.missing = [len(m) for m in index.missing_nodes[:-1]]
        self.missing.append(len({n for m in index.missing_nodes for n in m}))

    def facts(self, h: int) -> dict[str, Any]:
        ix, cap = self.index, self.capacity
        g, c = cap.axis.index[GPU], cap.axis.index["cpu"]
        alloc, used, off = cap.dom_alloc[h], cap.dom_used[h], self.unavailable[h]
        out: dict[str, Any] = {
            # the name; ``group`` below says which API group (for a name both hold too)
            "name": ix.hypernodes[h].name if h != ix.root else ix.names[h],
            "tier": int(ix.tier[h]),
            "nodes": int(self.nodes[h]),
            "gpu": {
                "free": int(alloc[g] - used[g] - off[g]) // 1000,
                "allocatable": int(alloc[g]) // 1000,
                "unavailable": int(off[g]) // 1000,
            },
            "cpu": {
                "free": format_milli(int(alloc[c] - used[c] - off[c])),
                "allocatable": format_milli(int(alloc[c])),
                "unavailable": format_milli(int(off[c])),
            },
            "health": {
                "unhealthyNodes": int(self.health.unhealthy_nodes[h]),
                "detail": self.health.describe(h),
            },
        }
        if self.missing[h]:
            out["missingNodes"] = (
                list(ix.missing_nodes[h])
                if h != ix.root
                else sorted({n for m in ix.missing_nodes for n in m})
            )
        if h != ix.root:
            hn = ix.hypernodes[h]
            out["group"] = hn.group
            out["tierName"] = hn.tier_name
            out["usable"] = bool(ix.usable[h])
        return out

    def label(self, h: int) -> str:
        f = self.facts(h)
        tier = f"tier {f['tier']}" + (f" ({escape(f['tierName'])})" if f.get("tierName") else "")
        nodes = f"{f['nodes']:,} node{'' if f['nodes'] == 1 else 's'}"
        if self.missing[h]:
            nodes += f" (+{self.missing[h]:,} listed, not in the snapshot)"
        parts = [f"[bold]{escape(self.index.names[h])}[/bold]", tier, nodes]
        cap = self.capacity
        for name, resource in (("GPU", GPU), ("CPU", "cpu")):
            k = cap.axis.index[resource]
            alloc, off = int(cap.dom_alloc[h, k]), int(self.unavailable[h, k])
            if not alloc:
                parts.append(f"no {name}s")
                continue
            free = alloc - int(cap.dom_used[h, k]) - off
            text = f"{name} {_people(free)}/{_people(alloc)} free"
            if off:
                text += f" ([yellow]{_people(off)} on unavailable nodes[/yellow])"
            parts.append(text)
        detail = f["health"]["detail"]
        parts.append(f"[yellow]degraded: {detail}[/yellow]" if detail else "[green]healthy[/green]")
        if f.get("usable") is False:
            parts.append("[red]unusable[/red]")
        return " · ".join(parts)

    def as_json(self, h: int, show_nodes: bool) -> dict[str, Any]:
        out = self.facts(h)
        out["children"] = [self.as_json(k, show_nodes) for k in self.index.children[h]]
        if show_nodes and h != self.index.root:
            out["members"] = [self.index.node_names[n] for n in self.index.direct_nodes[h].tolist()]
            if self.inside is not None:
                out["inside"] = inside_json(self.inside, out["members"])
        return out

    def add(self, parent: RichTree, h: int, show_nodes: bool) -> None:
        branch = parent.add(self.label(h))
        for k in self.index.children[h]:
            self.add(branch, k, show_nodes)
        if show_nodes:
            for n in self.index.direct_nodes[h].tolist():
                healthy = self.health.node_healthy(n)
                mark = "" if healthy else " [yellow](unhealthy)[/yellow]"
                leaf = branch.add(f"[dim]{escape(self.index.node_names[n])}[/dim]{mark}")
                if self.inside is not None:
                    add_inside(leaf, self.inside.node(self.index.node_names[n]))


def tree(
    files: Annotated[
        list[Path], typer.Argument(help="Snapshot files (YAML or JSON), or folders of them.")
    ],
    output: AnyOutput = Output.TEXT,
    nodes: Annotated[bool, typer.Option("--nodes", help="List the nodes under each leaf.")] = False,
    inside: Annotated[
        bool,
        typer.Option(
            "--inside",
            help="Also each node's inside: NVLink islands, PCIe switches and roots, NUMA "
            "nodes, from DRA ResourceSlices and nvidia-smi (implies --nodes).",
        ),
    ] = False,
) -> None:
    """Show the HyperNode forest with capacity and health."""
    snapshot = load_snapshot_or_exit(files)
    # The tree is still drawn from what could be read; say on stderr what could not.
    print_problems(snapshot.errors)
    index = TopologyIndex.build(snapshot.nodes, snapshot.hypernodes, snapshot.problems)
    view = _View(
        index,
        Capacity.with_bound_pods(index, snapshot.nodes, snapshot.pods),
        Health(index, snapshot.nodes),
        index_of(snapshot) if inside else None,
    )
    nodes = nodes or inside
    if output is not Output.TEXT:
        doc = view.as_json(index.root, nodes)
        doc["unusableTrees"] = [
            {**t.named(), "reasons": list(t.reasons)} for t in index.trees if not t.usable
        ]
        if index.mirrors:
            doc["mirrors"] = index.mirrors.to_dict()
        print_document(doc, output)
        return
    top = RichTree(view.label(index.root))
    for k in index.children[index.root]:
        view.add(top, k, nodes)
    console.print(top)
    outside = len(index.node_names) - len({int(n) for d in index.direct_nodes for n in d})
    if outside:
        console.print(
            f"[dim]{outside} node(s) in no HyperNode (only the cluster root holds them)[/dim]"
        )
    for t in index.trees:
        if not t.usable:
            console.print(f"[red]tree {escape(t.name)} is unusable:[/red]")
            for reason in t.reasons:
                console.print(f"  - {escape(reason)}")
    if index.mirrors:
        console.print(f"[dim]{escape(index.mirrors.note())}[/dim]")
