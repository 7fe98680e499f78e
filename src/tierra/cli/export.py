"""``tierra export FORMAT``: one topology, written for another consumer.

Formats are listed in ``FORMATS`` by hand; each maps a snapshot to manifests.
``TEXT_FORMATS`` map a snapshot to a file in another tool's own syntax (Slurm).

A HyperNode is (API group, name): ``volcano`` and ``tierra`` write the controller's
mirrored tree once (tierra's copy, said on stderr) and refuse two same-name HyperNodes
of both groups, which one group cannot hold (``export_formats.in_one_group``);
``--group`` writes one group's HyperNodes alone, in every format.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from tierra.api.hypernode import GROUPS, TIERRA_GROUP, VOLCANO_GROUP, encode_hypernode
from tierra.api.manifest import dump_json, dump_yaml
from tierra.api.snapshot import Snapshot
from tierra.cli.common import (
    Output,
    console,
    err_console,
    exit_on_errors,
    fail,
    load_snapshot_or_exit,
)
from tierra.discovery import export_formats
from tierra.errors import InputError
from tierra.topology.index import TopologyIndex

Exporter = Callable[[Snapshot], list[Mapping[str, Any]]]


def _hypernodes_as(group: str) -> Exporter:
    def export(snapshot: Snapshot) -> list[Mapping[str, Any]]:
        hypernodes, mirrors = export_formats.in_one_group(snapshot.hypernodes, group)
        if mirrors:
            err_console.print(
                f"[yellow]note:[/yellow] {escape(mirrors.note('writing'))}", highlight=False
            )
        return [encode_hypernode(h, group) for h in hypernodes]

    return export


FORMATS: dict[str, Exporter] = {
    "volcano": _hypernodes_as(VOLCANO_GROUP),
    "tierra": _hypernodes_as(TIERRA_GROUP),
    "kueue": lambda s: export_formats.export_kueue(s.hypernodes, s.nodes),
    "kai": lambda s: export_formats.export_kai(s.hypernodes, s.nodes),
    "labels": lambda s: export_formats.export_labels(s.hypernodes, s.nodes),
}
TEXT_FORMATS: dict[str, Callable[[Snapshot], str]] = {
    "slurm-conf": lambda s: export_formats.export_slurm_conf(s.hypernodes, s.nodes),
    "slurm-yaml": lambda s: export_formats.export_slurm_yaml(s.hypernodes, s.nodes),
}


def export(
    fmt: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="volcano, tierra, kueue, kai, labels, slurm-conf or slurm-yaml",
        ),
    ],
    files: Annotated[
        list[Path], typer.Argument(help="Snapshot files holding HyperNodes, or folders of them.")
    ],
    output: Annotated[
        Output | None,
        typer.Option("-o", "--output", help="yaml or json (manifest formats) [yaml]"),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(
            help=f"Only the HyperNodes of this API group ({TIERRA_GROUP} or {VOLCANO_GROUP}).",
        ),
    ] = None,
) -> None:
    """Convert the HyperNodes in FILES to FORMAT and print them."""
    exporter = FORMATS.get(fmt)
    if exporter is None and fmt not in TEXT_FORMATS:
        known = ", ".join(sorted([*FORMATS, *TEXT_FORMATS]))
        fail(f"unknown export format {fmt!r}; choose one of: {known}")
    if exporter is not None and output is Output.TEXT:
        fail(f"{fmt} is written as Kubernetes manifests: -o yaml or -o json, not text")
    if exporter is None and output is not None:
        fail(f"{fmt} is written in Slurm's own syntax; -o does not apply to it")
    if group is not None and group not in GROUPS:
        fail(f"--group {group!r}: a HyperNode group is {TIERRA_GROUP} or {VOLCANO_GROUP}")
    snapshot = load_snapshot_or_exit(files)
    exit_on_errors(snapshot.problems)
    if group is not None:
        snapshot = replace(
            snapshot, hypernodes=tuple(h for h in snapshot.hypernodes if h.group == group)
        )
    _something_to_write(snapshot, files)
    try:
        if exporter is None:
            text = TEXT_FORMATS[fmt](snapshot)
            console.out(text, end="" if text.endswith("\n") else "\n", highlight=False)
            return
        objects = exporter(snapshot)
    except InputError as exc:
        fail(exc)
    text = dump_json(objects) if output is Output.JSON else dump_yaml(objects)
    console.out(text, end="" if text.endswith("\n") else "\n", highlight=False)


def _something_to_write(snapshot: Snapshot, files: list[Path]) -> None:
    """Exit 2 saying why when the input holds no usable HyperNode tree; warn of broken ones.

    An empty result would look like a topology with nothing in it, and a consumer fed it
    (Kueue, Slurm) would lose the topology it had.
    """
    quoted = " ".join(shlex.quote(str(f)) for f in files)
    if not snapshot.hypernodes:
        fail(
            f"nothing to export: {quoted} holds no HyperNodes. Discover them first:"
            f" `tierra discover --help` lists the sources (node labels, fabric dumps, Slurm)"
        )
    index = TopologyIndex.build(snapshot.nodes, snapshot.hypernodes)
    unusable = [t for t in index.trees if not t.usable]
    if len(unusable) == len(index.trees):
        fail(
            f"nothing to export: every HyperNode tree in {quoted} is unusable"
            f" ({', '.join(t.name for t in unusable)}); `tierra validate {quoted}` says why"
        )
    for t in unusable:
        err_console.print(
            f"[yellow]warning:[/yellow] tree {t.name} is unusable ({len(t.reasons)} problem(s));"
            f" `tierra validate {quoted}` says why",
            markup=True,
            highlight=False,
        )
