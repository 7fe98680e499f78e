"""``tierra validate``: every problem in the input, each with file, object and field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierra.cli.common import (
    EXIT_PROBLEMS,
    AnyOutput,
    Output,
    console,
    load_snapshot_or_exit,
    print_document,
    print_problems,
)
from tierra.errors import errors_only
from tierra.scheduler.queue_tree import QueueTree, podgroup_queue_problems
from tierra.scheduler.topology_checks import all_podgroup_problems
from tierra.topology.index import TopologyIndex


def validate(
    files: Annotated[
        list[Path], typer.Argument(help="Snapshot files (YAML or JSON), or folders of them.")
    ],
    output: AnyOutput = Output.TEXT,
    strict: Annotated[
        bool, typer.Option(help="Also report objects of kinds tierra does not use.")
    ] = False,
) -> None:
    """List every problem (not just the first); exit 1 if there are any, 2 if unreadable."""
    snapshot = load_snapshot_or_exit(files, strict=strict)
    index = TopologyIndex.build(snapshot.nodes, snapshot.hypernodes, snapshot.problems)
    queues = QueueTree.build(snapshot.queues)
    problems = [
        *snapshot.problems,
        *index.problems,
        *all_podgroup_problems(snapshot.podgroups, index),
        *queues.problems,
        *podgroup_queue_problems(snapshot.podgroups, queues),
    ]
    problems.sort(
        key=lambda p: (
            p.origin.file if p.origin else "",
            p.origin.document if p.origin else 0,
            p.obj,
            p.path,
        )
    )
    errors = errors_only(problems)
    if strict:
        errors = problems
    if output is not Output.TEXT:
        doc = {
            "valid": not errors,
            "problems": [p.to_dict() for p in problems],
            "trees": [
                {
                    "name": t.name,
                    "usable": t.usable,
                    "reasons": list(t.reasons),
                    "hyperNodes": len(t.hypernodes),
                }
                for t in index.trees
            ],
        }
        print_document(doc, output)
    else:
        print_problems(problems, to=console)
        usable = sum(t.usable for t in index.trees)
        summary = (
            f"{len(snapshot.nodes)} nodes, {len(snapshot.hypernodes)} HyperNodes in "
            f"{len(index.trees)} trees ({usable} usable), {len(snapshot.pods)} pods, "
            f"{len(snapshot.podgroups)} PodGroups, {len(snapshot.queues)} queues"
        )
        for t in index.trees:
            if not t.usable:
                console.print(f"[red]tree {t.name} is unusable[/red] ({len(t.reasons)} problems)")
        if errors:
            console.print(f"[red]{len(errors)} problem(s)[/red]; {summary}")
        else:
            console.print(f"[green]valid[/green]: {summary}")
    if errors:
        raise typer.Exit(EXIT_PROBLEMS)
