"""``tierra explain GANG FILE...``: why a gang waits, tier by tier, domain by domain.

Runs the same session as ``tierra schedule`` (earlier gangs take their room first) and
records, for the named gang, every candidate HyperNode of every tier it searched:
rejected (and why: tier not allowed, degraded, free resources short, pods that fit node
by node), fitting (with its score), tried and failed, or chosen. Long tiers show the
best ``--show`` candidates and summarise the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tierra.cli.common import Output, console, fail, print_document
from tierra.cli.schedule import (
    ConfigOption,
    NamesOption,
    NowOption,
    OutputOption,
    checked_snapshot,
    config_or_exit,
    exit_if_no_topology,
    note_mirrors,
    session_clock,
    warn_unusable_trees,
)
from tierra.scheduler import ClusterStore, Explanation, TierTrace, Verdict, explain_gang
from tierra.scheduler.devices.constraint import EXTENSION as DEVICES
from tierra.scheduler.devices.placement import device_snapshot
from tierra.scheduler.explain.reasons import best_first, tally


def _summary(rest: list[Verdict]) -> str:
    kinds = tally(rest)
    parts = [f"{n} {escape(k)}" for k, n in kinds.most_common(4)]
    more = len(kinds) - 4
    return "; ".join(parts) + (f"; {more} other reasons" if more > 0 else "")


def _tier_table(tt: TierTrace, show: int) -> Table:
    verdicts = best_first(tt.resolved())
    table = Table(title=f"tier {tt.tier} · {escape(tt.scope)}", title_justify="left")
    table.add_column("HyperNode")
    table.add_column("outcome")
    table.add_column("score", justify="right")
    table.add_column("detail", overflow="fold")
    colour = {"chosen": "green", "failed": "red", "fits": "cyan", "rejected": "dim"}
    for v in verdicts[:show]:
        c = colour.get(v.outcome, "white")
        score = "" if v.score is None else f"{v.score:.1f}"
        table.add_row(escape(v.domain), f"[{c}]{v.outcome}[/{c}]", score, escape(v.detail))
    rest = verdicts[show:]
    if rest:
        table.add_row(f"… {len(rest)} more", "", "", _summary(rest))
    return table


def _render(exp: Explanation, show: int) -> None:
    colour = "green" if exp.status == "scheduled" else "red"
    console.print(f"[bold]{escape(exp.podgroup)}[/bold]: [{colour}]{exp.status}[/{colour}]")
    if exp.constraint:
        console.print(f"constraint: {escape(exp.constraint)}")
    console.print(escape(exp.summary))
    for note in exp.notes:
        console.print(escape(note))
    if not exp.tiers and exp.status == "unschedulable":
        console.print("[dim](rejected before any domain was searched)[/dim]")
    for tt in exp.tiers:
        console.print(_tier_table(tt, show))


def explain(
    gang: Annotated[
        str, typer.Argument(help="PodGroup as ns/name (or name, in default), or a lone pod.")
    ],
    files: Annotated[list[Path], typer.Argument(help="Snapshot files (YAML or JSON).")],
    *,
    output: OutputOption = Output.TEXT,
    scheduler_name: NamesOption = None,
    config: ConfigOption = None,
    show: Annotated[
        int, typer.Option("--show", min=1, help="Candidates listed per tier; the rest summarised.")
    ] = 12,
    now: NowOption = None,
) -> None:
    """Show, per tier, each candidate domain for one gang and why it was rejected or chosen.

    Exit status as ``tierra schedule``'s: 0, 2 for bad input or an unknown gang, 3 when
    every tree of the input was dropped (the explanation ignores the topology).
    """
    clock = session_clock(now)
    key = gang if "/" in gang else f"default/{gang}"
    cfg = config_or_exit(config, scheduler_name)
    snapshot = checked_snapshot(files)
    seen, devices, _ = device_snapshot(snapshot, cfg.scheduler_names)
    cache = ClusterStore.from_snapshot(seen)
    cache.extensions[DEVICES] = devices  # DRA: which nodes can serve each pod's claims
    warn_unusable_trees(cache)
    note_mirrors(cache)
    _, exp = explain_gang(cache, key, cfg, now=clock)
    if exp.status == "unknown":
        fail(exp.summary)
    if output is Output.TEXT:
        _render(exp, show)
    else:
        print_document(exp.to_dict(), output)
    exit_if_no_topology(snapshot, cache)
