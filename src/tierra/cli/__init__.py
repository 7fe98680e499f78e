"""The ``tierra`` command line: wiring only; the work happens in the core packages.

Commands are listed here by hand (no registration by import side effect), one
``Lazy`` line each: the module is imported only when its command runs (see ``lazy``),
so ``tierra --help`` imports no command at all. Add a command with one more line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tierra import __version__
from tierra.cli.lazy import Lazy, LazyGroup


class Commands(LazyGroup):
    lazy = (
        Lazy(
            "validate",
            "tierra.cli.validate",
            "validate",
            "List every problem (not just the first); exit 1 if there are any, 2 if unreadable.",
        ),
        Lazy(
            "tree", "tierra.cli.tree", "tree", "Show the HyperNode forest with capacity and health."
        ),
        Lazy(
            "export",
            "tierra.cli.export",
            "export",
            "Convert the HyperNodes in FILES to FORMAT and print them.",
        ),
        Lazy(
            "schedule",
            "tierra.cli.schedule",
            "schedule",
            "Run one scheduling session over a snapshot and print its decisions.",
        ),
        Lazy(
            "explain",
            "tierra.cli.explain",
            "explain",
            "Show, per tier, each candidate domain for one gang and why it was rejected or chosen.",
        ),
        Lazy(
            "discover",
            "tierra.cli.discover",
            "discover",
            "Discover HyperNodes from SOURCE and print them (or the plan with --reconcile).",
        ),
        Lazy(
            "simulate",
            "tierra.cli.simulate",
            "simulate",
            "Compare placement policies on a simulated cluster and workload.",
        ),
        Lazy(
            "serve",
            "tierra.cli.serve",
            "serve",
            "Serve the topology dashboard: the picture, gangs, and why pending gangs wait.",
        ),
        Lazy(
            "scheduler",
            "tierra.cli.scheduler",
            "scheduler",
            "Run the gang scheduler against a cluster until SIGTERM/SIGINT.",
        ),
        Lazy(
            "snapshot",
            "tierra.cli.snapshot",
            "snapshot",
            "Dump Nodes, Pods, HyperNodes, PodGroups and Queues of a cluster as snapshot files.",
        ),
        Lazy(
            "controller",
            "tierra.cli.controller",
            "controller",
            "Run the topology controller until SIGTERM (see deploy/README.md).",
        ),
        Lazy(
            "webhook",
            "tierra.cli.webhook",
            "webhook",
            "Run the admission webhook until SIGTERM (see deploy/README.md).",
        ),
    )


app = typer.Typer(
    name="tierra",
    help="Infrastructure topology as a first-class API, and a topology-aware gang scheduler.",
    cls=Commands,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tierra {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print tierra's version and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Infrastructure topology as a first-class API, and a topology-aware gang scheduler."""


def main() -> None:
    app()
