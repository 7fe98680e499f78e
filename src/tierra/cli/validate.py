"""``tierra validate``: every problem in the input, each with file, object and field.

Beyond the objects themselves: the topology (``TopologyIndex``: cycles, parents, tiers)
and what ``tierra schedule`` would refuse whatever room is free (``scheduler.refusals``:
missing PodGroups and queues, minMember above the pods, unknown tier names, gangs too
big for their tier), in the scheduler's own words. The controller's Volcano copies of
tierra's HyperNodes are counted once (``tierra.topology.mirrors``), and said so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierra.api.snapshot import Snapshot
from tierra.cli.common import (
    EXIT_PROBLEMS,
    AnyOutput,
    Output,
    console,
    load_snapshot_or_exit,
    print_document,
    print_problems,
)
from tierra.errors import Problem, errors_only
from tierra.topology.index import TopologyIndex


def validate(
    files: Annotated[
        list[Path], typer.Argument(help="Snapshot files (YAML or JSON), or folders of them.")
    ],
    output: AnyOutput = Output.TEXT,
    strict: Annotated[
        bool, typer.Option(help="Also report objects of kinds tierra does not use.")
    ] = False,
    scheduler_name: Annotated[
        list[str] | None,
        typer.Option(
            "--scheduler-name",
            help="Check pending pods with this spec.schedulerName (repeatable; default tierra).",
        ),
    ] = None,
) -> None:
    """List every problem (not just the first); exit 1 if there are any, 2 if unreadable."""
    snapshot = load_snapshot_or_exit(files, strict=strict)
    pending = any(not p.bound and not p.terminated for p in snapshot.pods)
    if snapshot.podgroups or snapshot.queues or pending:
        index, refused = _scheduler_problems(snapshot, tuple(scheduler_name or ()))
    else:  # a topology file: nothing the scheduler would judge, so it is not even imported
        index = TopologyIndex.build(snapshot.nodes, snapshot.hypernodes, snapshot.problems)
        refused = []
    problems = [*snapshot.problems, *index.problems, *refused, *_dra_problems(snapshot)]
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
                    **t.named(),
                    "usable": t.usable,
                    "reasons": list(t.reasons),
                    "hyperNodes": len(t.hypernodes),
                }
                for t in index.trees
            ],
        }
        if index.mirrors:  # the controller's Volcano copies: one topology, not two
            doc["mirrors"] = index.mirrors.to_dict()
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
        if index.mirrors:
            console.print(f"[dim]{index.mirrors.note()}[/dim]")
        if errors:
            console.print(f"[red]{len(errors)} problem(s)[/red]; {summary}")
        else:
            console.print(f"[green]valid[/green]: {summary}")
    if errors:
        raise typer.Exit(EXIT_PROBLEMS)


def _scheduler_problems(
    snapshot: Snapshot, scheduler_names: tuple[str, ...]
) -> tuple[TopologyIndex, list[Problem]]:
    """The index, the queue tree's problems and what a session would refuse
    (``scheduler.refusals``), over the cache the scheduler builds (its index included)."""
    from tierra.scheduler.config import SchedulerConfig  # noqa: PLC0415
    from tierra.scheduler.explain.refusals import refusals  # noqa: PLC0415
    from tierra.scheduler.queueing.queue_tree import QueueTree, podgroup_queue_problems  # noqa: PLC0415
    from tierra.scheduler.state.store import ClusterStore  # noqa: PLC0415 - only for gangs to judge

    cache = ClusterStore.from_snapshot(snapshot)
    config = SchedulerConfig().with_scheduler_names(scheduler_names)
    queues = QueueTree.build(snapshot.queues)
    return cache.index, [
        *queues.problems,
        *podgroup_queue_problems(snapshot.podgroups, queues),
        *refusals(cache, config),
    ]


def _dra_problems(snapshot: Snapshot) -> list[Problem]:
    """Claims no node could ever serve: unknown DeviceClasses, selectors that do not compile."""
    dra = snapshot.device_classes or snapshot.resource_claims or snapshot.claim_templates
    if not dra and not any(p.resource_claims for p in snapshot.pods):
        return []
    from tierra.scheduler.devices.checks import dra_problems  # noqa: PLC0415 - DRA inputs only

    return dra_problems(snapshot)
