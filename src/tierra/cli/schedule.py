"""``tierra schedule FILE...``: one scheduling session over a snapshot, offline.

Prints the bindings (complete gangs only), the gangs left waiting with one reason each,
and any evictions, as a table or as the JSON contract of DESIGN.md. Exit status 0
whenever the input was valid, placed or not; 2 when it could not be read, an object in
it is invalid, or the ``--config`` file is wrong. Problems confined to HyperNodes are
printed as warnings: the trees involved are unusable and everything else schedules;
when that leaves no usable HyperNode of all the input had, the decisions are printed
and the exit status is 3 (``EXIT_NO_TOPOLOGY``): they ignore the topology, which a
script replaying a cluster must not take for a faithful replay.

A HyperNode is (API group, name). Where the controller mirrors tierra's HyperNodes into
Volcano's group, the session schedules by tierra's copies and says so on stderr; where
both groups hold one name otherwise, the two are separate HyperNodes, named
``group/name`` in reasons and given ``hyperNodeGroup`` beside ``hyperNode`` in the JSON.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tierra.api.snapshot import Snapshot
from tierra.cli.common import (
    EXIT_NO_TOPOLOGY,
    Output,
    console,
    err_console,
    exit_on_errors,
    fail,
    load_snapshot_or_exit,
    print_document,
    print_problems,
)
from tierra.errors import ConfigError, errors_only
from tierra.scheduler import (
    ClusterStore,
    SchedulerConfig,
    SessionResult,
    load_config,
    run_session,
)
from tierra.scheduler.devices.constraint import EXTENSION
from tierra.scheduler.devices.placement import (
    device_snapshot,
    devices_dict,
    session_allocations,
)
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "--scheduler-config",  # the name simulate uses for the same file
        help="Scheduler configuration (YAML): policies and weights.",
    ),
]
NamesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--scheduler-name",
        help="Schedule pending pods with this spec.schedulerName (repeatable; default tierra).",
    ),
]
OutputOption = Annotated[Output, typer.Option("-o", "--output", help="text, json or yaml")]


def _instant(text: str | None) -> float | None:
    """``--now``: RFC 3339 (``2026-12-01T22:00:00Z``) or seconds since the epoch."""
    if text is None:
        return None
    from tierra.api.meta import parse_time  # noqa: PLC0415 - keep --help fast

    found = parse_time(text)
    if found is None:
        try:
            found = float(text)
        except ValueError:
            found = None
    if found is None or not math.isfinite(found):
        raise typer.BadParameter(
            f"expected an RFC 3339 time like 2026-12-01T22:00:00Z or seconds since the "
            f"epoch, got {text!r}",
            param_hint="--now",
        )
    return found


NowOption = Annotated[
    str | None,
    typer.Option(
        "--now",
        help=(
            "The session's clock for the preemption delay: RFC 3339 or epoch seconds "
            "(default: the wall clock). Gangs are pending since their pods' creationTimestamp."
        ),
    ),
]


def session_clock(now: str | None) -> float:
    """The time a session over a snapshot runs at: ``--now``, else the wall clock.

    A snapshot records no time of its own (``tierra snapshot`` writes the objects only),
    and the replay of one just taken wants the present; ``--now`` replays any instant, the
    same decisions every time."""
    import time  # noqa: PLC0415

    found = _instant(now)
    return time.time() if found is None else found


def config_or_exit(path: Path | None, names: list[str] | None) -> SchedulerConfig:
    """The configuration from ``--config`` (exit 2 on any mistake) and ``--scheduler-name``."""
    config = SchedulerConfig()
    if path is not None:
        try:
            config = load_config(path)
        except ConfigError as exc:
            fail(str(exc))
    return config.with_scheduler_names(tuple(names or ()))


def checked_snapshot(files: list[Path]) -> Snapshot:
    """Load; exit 2 on errors in objects the scheduler needs, warn about HyperNodes."""
    snapshot = load_snapshot_or_exit(files)
    topo = [p for p in snapshot.problems if p.obj.startswith("HyperNode/")]
    rest = [p for p in snapshot.problems if not p.obj.startswith("HyperNode/")]
    exit_on_errors(rest)
    if topo:
        print_problems(errors_only(topo) or topo, to=err_console)
        err_console.print("[yellow]the trees of these HyperNodes are not used[/yellow]")
    return snapshot


def note_other_schedulers(snapshot: Snapshot, config: SchedulerConfig) -> None:
    """Say (on stderr) when pending pods were skipped for their ``spec.schedulerName``."""
    others = Counter(
        p.scheduler_name
        for p in snapshot.pods
        if not p.bound and not p.terminated and p.scheduler_name not in config.scheduler_names
    )
    if others:
        names = ", ".join(f"{n} ({c})" for n, c in sorted(others.items()))
        flags = " ".join(f"--scheduler-name {n}" for n in sorted(others))
        err_console.print(
            f"[yellow]note:[/yellow] pending pods of other schedulers were left alone: "
            f"{escape(names)}; to schedule them too, add {escape(flags)}"
        )


def note_gated(snapshot: Snapshot, config: SchedulerConfig) -> None:
    """Say (on stderr) which pending pods of ours wait for their ``spec.schedulingGates``."""
    gated = [
        p
        for p in snapshot.pods
        if p.gated and not p.bound and p.scheduler_name in config.scheduler_names
    ]
    if gated:
        shown = ", ".join(f"{p.key} ({', '.join(p.scheduling_gates)})" for p in gated[:5])
        more = f" and {len(gated) - 5} more" if len(gated) > 5 else ""
        err_console.print(
            f"[yellow]note:[/yellow] pods held by spec.schedulingGates are not scheduled "
            f"until their gates are removed: {escape(shown)}{more}"
        )


def warn_unusable_trees(cache: ClusterStore) -> None:
    """Trees the scheduler will not use (cycles, second parents, ...), with why, on stderr."""
    for tree in cache.index.trees:
        if not tree.usable:
            err_console.print(
                f"[yellow]warning:[/yellow] topology tree {escape(tree.name)} is not used: "
                + escape("; ".join(tree.reasons[:3]))
                + (f" (and {len(tree.reasons) - 3} more)" if len(tree.reasons) > 3 else "")
            )


def note_mirrors(cache: ClusterStore) -> None:
    """Say (on stderr) which group the session schedules by where the controller's
    Volcano copies were set aside (``tierra.topology.mirrors``)."""
    mirrors = cache.index.mirrors
    if mirrors:
        err_console.print(f"[yellow]note:[/yellow] {escape(mirrors.note())}")


def no_usable_topology(snapshot: Snapshot, cache: ClusterStore) -> bool:
    """Whether the input held HyperNodes and every one is in a dropped tree (the label
    domains tierra makes for upstream PodGroups are not the input's)."""
    from tierra.api.workload import SYNTHETIC_ANNOTATION  # noqa: PLC0415

    index = cache.index
    given = [h for h in snapshot.hypernodes if SYNTHETIC_ANNOTATION not in h.meta.annotations]
    usable = (bool(index.usable[i]) for h in given if (i := index.key_ix.get(h.key)) is not None)
    return bool(given) and not any(usable)


def exit_if_no_topology(snapshot: Snapshot, cache: ClusterStore) -> None:
    """After the output: exit 3 when every tree of the input was dropped."""
    if no_usable_topology(snapshot, cache):
        err_console.print(
            "[red]error:[/red] no usable HyperNode: every tree of the input was dropped "
            "(the warnings above say why), so these decisions ignore the topology "
            f"(exit status {EXIT_NO_TOPOLOGY})"
        )
        raise typer.Exit(EXIT_NO_TOPOLOGY)


def render(result: SessionResult) -> None:
    """The decisions as tables a person reads."""
    if result.evictions:
        ev = Table(title="Evictions", title_justify="left")
        for col in ("pod", "node", "reason"):
            ev.add_column(col)
        for e in result.evictions:
            ev.add_row(escape(e.pod), escape(e.node), escape(e.reason))
        console.print(ev)
    if result.bindings:
        bt = Table(title="Bindings", title_justify="left")
        for col in ("pod", "node", "HyperNode"):
            bt.add_column(col)
        for b in result.bindings:
            bt.add_row(escape(b.pod), escape(b.node), escape(b.hypernode or "-"))
        console.print(bt)
    if result.unschedulable:
        ut = Table(title="Unschedulable", title_justify="left")
        ut.add_column("PodGroup")
        ut.add_column("reason", overflow="fold")
        for u in result.unschedulable:
            ut.add_row(escape(u.podgroup), escape(u.reason))
        console.print(ut)
    if len(result.queues) > 2:  # queues beyond the root and default ones
        qt = Table(title="Queues", title_justify="left")
        for col in ("queue", "parent", "allocated", "deserved", "pending", "running"):
            qt.add_column(col)
        for q in result.queues:
            d = q.to_dict()
            qt.add_row(
                escape(q.name),
                escape(q.parent or "-"),
                escape(_amounts(d["allocated"])),
                escape(_amounts(d["deserved"])),
                str(q.pending),
                str(q.running),
            )
        console.print(qt)
    console.print(
        f"{_count(len(result.bindings), 'pod')} bound, "
        f"{_count(len(result.unschedulable), 'gang')} waiting, "
        f"{_count(len(result.evictions), 'eviction')}"
    )


def _amounts(quantities: dict[str, str]) -> str:
    return ", ".join(f"{v} {r}" for r, v in quantities.items() if r != "pods") or "-"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def schedule(
    files: Annotated[list[Path], typer.Argument(help="Snapshot files (YAML or JSON).")],
    output: OutputOption = Output.TEXT,
    scheduler_name: NamesOption = None,
    config: ConfigOption = None,
    now: NowOption = None,
) -> None:
    """Run one scheduling session over a snapshot and print its decisions.

    Exit status: 0 when the input was valid (placed or not); 2 when it could not be read,
    an object in it is invalid, or the config is wrong; 3 when the input held HyperNodes
    and every tree was dropped for its problems (the decisions, printed all the same,
    ignore the topology).
    """
    clock = session_clock(now)
    cfg = config_or_exit(config, scheduler_name)
    snapshot = checked_snapshot(files)
    note_other_schedulers(snapshot, cfg)
    note_gated(snapshot, cfg)
    seen, devices, why = device_snapshot(snapshot, cfg.scheduler_names)
    cache = ClusterStore.from_snapshot(seen)
    cache.extensions[EXTENSION] = devices
    warn_unusable_trees(cache)
    note_mirrors(cache)
    result = run_session(cache, cfg, now=clock)
    placed = session_allocations(result, devices, {p.key: p for p in snapshot.pods})
    if output is Output.TEXT:
        render(result)
        render_devices(placed, why)
    else:
        doc = result.to_dict()
        for b in doc["bindings"]:
            if b["pod"] in placed:
                b["devices"] = devices_dict(placed[b["pod"]])
        if why:
            doc["devices"] = {pod: str(r) for pod, r in sorted(why.items())}
        print_document(doc, output)
    exit_if_no_topology(snapshot, cache)


def render_devices(
    placed: Mapping[str, Sequence[ClaimAllocation]], why: Mapping[str, DeviceRefusal]
) -> None:
    """Each bound pod's allocated devices, and why pods with claims have no node."""
    if placed:
        table = Table(title="Devices", title_justify="left")
        for col in ("pod", "claim", "request", "device"):
            table.add_column(col)
        for pod, allocations in placed.items():
            for a in allocations:
                for r in a.allocation.results:
                    table.add_row(
                        escape(pod),
                        escape(a.claim),
                        escape(r.request),
                        escape(f"{r.driver}/{r.pool}/{r.device}"),
                    )
        console.print(table)
    for pod, refusal in sorted(why.items()):
        console.print(f"{escape(pod)}: no node can allocate its claims: {escape(str(refusal))}")
