"""``tierra export FORMAT``: one topology, written for another consumer.

Formats are listed in ``FORMATS`` by hand; each maps a snapshot to manifests.
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
}


def export(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="volcano or tierra")],
    files: Annotated[list[Path], typer.Argument(help="Snapshot files holding HyperNodes.")],
    output: Annotated[Output, typer.Option("-o", "--output", help="yaml or json")] = Output.YAML,
) -> None:
    """Convert the HyperNodes in FILES to FORMAT and print them."""
    exporter = FORMATS.get(fmt)
    if exporter is None:
        fail(f"unknown export format {fmt!r}; choose one of: {', '.join(sorted(FORMATS))}")
    snapshot = load_snapshot_or_exit(files)
    exit_on_errors(snapshot.problems)
    objects = exporter(snapshot)
    text = dump_json(objects) if output is Output.JSON else dump_yaml(objects)
    console.out(text, end="" if text.endswith("\n") else "\n", highlight=False)
