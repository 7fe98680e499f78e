"""The ``tierra`` command line: wiring only; the work happens in the core packages.

Commands are listed here by hand (no registration by import side effect): each lives
in its own module and is added with ``app.command(name)(function)``.
"""

from __future__ import annotations

import typer

from tierra.cli import discover, explain, export, schedule, serve, simulate, tree, validate

app = typer.Typer(
    name="tierra",
    help="Infrastructure topology as a first-class API, and a topology-aware gang scheduler.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("validate")(validate.validate)
app.command("tree")(tree.tree)
app.command("export")(export.export)
app.command("schedule")(schedule.schedule)
app.command("explain")(explain.explain)
app.command("discover")(discover.discover)
app.command("simulate")(simulate.simulate)
app.command("serve")(serve.serve)


def main() -> None:
    app()
