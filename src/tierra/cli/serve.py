"""``tierra serve``: the dashboard over a snapshot.

``tierra serve FILE...`` reads the same files as ``tierra tree`` (objects that could not
be read are listed on stderr and on the page). The web stack is imported inside the
command, so ``tierra --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierra.cli.common import console, err_console, fail, load_snapshot_or_exit, print_problems
from tierra.cli.schedule import ConfigOption, NamesOption, config_or_exit
from tierra.cli.simulate import DEFAULT_REPORT


def serve(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Snapshot files (YAML or JSON), as for tree.")
    ] = None,
    *,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port (0: any free port).")
    ] = 8080,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help=f"A simulator report to link from the page [{DEFAULT_REPORT} if it exists].",
        ),
    ] = None,
    scheduler_name: NamesOption = None,
    config: ConfigOption = None,
) -> None:
    """Serve the topology dashboard: the picture, gangs, and why pending gangs wait."""
    if not files:
        fail("give snapshot files (what tierra tree reads)")
    cfg = config_or_exit(config, scheduler_name)
    if report is not None and not report.is_file():
        fail(f"{report}: no such report file (tierra simulate --report {report} writes one)")
    if report is None and DEFAULT_REPORT.is_file():
        report = DEFAULT_REPORT

    # The web stack, imported for this command only (``tierra --help`` stays fast).
    from tierra.web.model import Dashboard, Source  # noqa: PLC0415
    from tierra.web.server import ServeError, Server  # noqa: PLC0415

    snapshot = load_snapshot_or_exit(files)
    print_problems(snapshot.errors)
    dash = Dashboard.from_snapshot(
        snapshot,
        source=Source("snapshot", ", ".join(str(f) for f in files)),
        config=cfg,
        report=report,
    )
    try:
        server = Server(dash, host=host, port=port)
    except ServeError as exc:
        fail(str(exc))
    console.print(f"tierra dashboard: [bold]{server.url}[/bold] (Ctrl-C stops it)")
    err_console.file.flush()
    console.file.flush()
    server.run()
