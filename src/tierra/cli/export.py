"""``tierra export FORMAT``: one topology, written for another consumer.

Formats are listed in ``FORMATS`` by hand; each maps a snapshot to manifests.
``TEXT_FORMATS`` map a snapshot to a file in another tool's own syntax (Slurm).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, encode_hypernode
from tierra.api.manifest import dump_json, dump_yaml
from tierra.api.snapshot import Snapshot
from tierra.cli.common import Output, console, exit_on_errors, fail, load_snapshot_or_exit
from tierra.discovery import exporters
from tierra.errors import InputError

Exporter = Callable[[Snapshot], list[Mapping[str, Any]]]


def _hypernodes_as(group: str) -> Exporter:
    def export(snapshot: Snapshot) -> list[Mapping[str, Any]]:
        return [
            encode_hypernode(h, group) for h in sorted(snapshot.hypernodes, key=lambda h: h.name)
        ]

    return export


FORMATS: dict[str, Exporter] = {
    "volcano": _hypernodes_as(VOLCANO_GROUP),
    "tierra": _hypernodes_as(TIERRA_GROUP),
    "kueue": lambda s: exporters.export_kueue(s.hypernodes, s.nodes),
    "kai": lambda s: exporters.export_kai(s.hypernodes, s.nodes),
    "labels": lambda s: exporters.export_labels(s.hypernodes, s.nodes),
}
TEXT_FORMATS: dict[str, Callable[[Snapshot], str]] = {
    "slurm-conf": lambda s: exporters.export_slurm_conf(s.hypernodes, s.nodes),
    "slurm-yaml": lambda s: exporters.export_slurm_yaml(s.hypernodes, s.nodes),
}


def export(
    fmt: Annotated[
        str,
        typer.Argument(
            metavar="FORMAT",
            help="volcano, tierra, kueue, kai, labels, slurm-conf or slurm-yaml",
        ),
    ],
    files: Annotated[list[Path], typer.Argument(help="Snapshot files holding HyperNodes.")],
    output: Annotated[Output, typer.Option("-o", "--output", help="yaml or json")] = Output.YAML,
) -> None:
    """Convert the HyperNodes in FILES to FORMAT and print them."""
    exporter = FORMATS.get(fmt)
    if exporter is None and fmt not in TEXT_FORMATS:
        known = ", ".join(sorted([*FORMATS, *TEXT_FORMATS]))
        fail(f"unknown export format {fmt!r}; choose one of: {known}")
    snapshot = load_snapshot_or_exit(files)
    exit_on_errors(snapshot.problems)
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
