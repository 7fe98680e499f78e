"""``tierra serve``: the dashboard, over a snapshot or a live cluster.

``tierra serve FILE...`` reads the same files as ``tierra tree`` (objects that could not
be read are listed on stderr and on the page); ``tierra serve --kubeconfig FILE`` watches
a cluster and updates the open page as it changes, and ``tierra serve`` alone watches the
cluster it runs in (the pod's service account), else ``$KUBECONFIG`` or
``~/.kube/config``. The web stack is imported inside the command, so ``tierra --help``
stays fast.
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
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="Watch the cluster this names. Without files or this: in-cluster, else "
            "$KUBECONFIG or ~/.kube/config.",
        ),
    ] = None,
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
    if files and kubeconfig is not None:
        fail("give snapshot files (what tierra tree reads) or --kubeconfig FILE, not both")
    cfg = config_or_exit(config, scheduler_name)
    if report is not None and not report.is_file():
        fail(f"{report}: no such report file (tierra simulate --report {report} writes one)")
    if report is None and DEFAULT_REPORT.is_file():
        report = DEFAULT_REPORT

    # The web stack, imported for this command only (``tierra --help`` stays fast).
    from tierra.web.app import Background  # noqa: PLC0415
    from tierra.web.model import Dashboard, Source  # noqa: PLC0415
    from tierra.web.server import ServeError, Server  # noqa: PLC0415

    background: list[Background] = []
    if not files:
        from tierra.kube.client import KubeConfigError  # noqa: PLC0415
        from tierra.web.live import live_dashboard  # noqa: PLC0415

        try:
            dash, feed = live_dashboard(kubeconfig, config=cfg, report=report)
        except KubeConfigError as exc:
            fail(str(exc))
        background.append(feed)
    else:
        import gc  # noqa: PLC0415

        from tierra.bulk import building  # noqa: PLC0415

        with building():
            snapshot = load_snapshot_or_exit(files or [])
            print_problems(snapshot.errors)
            dash = Dashboard.from_snapshot(
                snapshot,
                source=Source("snapshot", ", ".join(str(f) for f in files or [])),
                config=cfg,
                report=report,
            )
            dash.warm()
        gc.freeze()  # all that lives as long as the server: later collections skip it
    try:
        # A live page refetches at most once a second however fast the cluster changes.
        debounce = 1.0 if background else 0.25
        server = Server(dash, host=host, port=port, background=background, debounce=debounce)
    except ServeError as exc:
        fail(str(exc))
    console.print(f"tierra dashboard: [bold]{server.url}[/bold] (Ctrl-C stops it)")
    err_console.file.flush()
    console.file.flush()
    server.run()
