"""What every command shares: loading input, failing cleanly, one console.

Every command turns ``InputError`` into one message on stderr and exit status 2, so a
user never sees a Python traceback for their own input.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from tierra.api.manifest import dump_yaml
from tierra.api.snapshot import Snapshot, load_snapshot
from tierra.errors import InputError, Problem, Severity, errors_only

# Piped output is read by scripts and CI logs: do not crop it to 80 columns.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
EXIT_NO_TOPOLOGY = 3
"""``schedule`` and ``explain``: the input held HyperNodes and not one is usable (every
tree dropped for its problems), so the decisions printed ignore the topology."""


class Output(enum.StrEnum):
    TEXT = "text"
    JSON = "json"
    YAML = "yaml"


AnyOutput = Annotated[Output, typer.Option("-o", "--output", help="text, json or yaml")]
"""``-o`` of a command that prints for people by default and honours all three."""


def fail(message: str | InputError) -> NoReturn:
    """Print ``message`` (every problem of an ``InputError``) and exit with status 2."""
    if isinstance(message, InputError):
        for p in message.problems:
            err_console.print(f"[red]error:[/red] {_escape(str(p))}")
    else:
        err_console.print(f"[red]error:[/red] {_escape(message)}")
    raise typer.Exit(EXIT_BAD_INPUT)


def _escape(text: str) -> str:
    return text.replace("[", r"\[")


def load_snapshot_or_exit(paths: Sequence[Path], *, strict: bool = False) -> Snapshot:
    if not paths:
        fail("no input files given")
    try:
        return load_snapshot(paths, strict=strict)
    except InputError as exc:
        fail(exc)


def print_problems(problems: Sequence[Problem], *, to: Console = err_console) -> None:
    for p in problems:
        colour = "red" if p.severity is Severity.ERROR else "yellow"
        to.print(f"[{colour}]{p.severity}:[/{colour}] {_escape(str(p))}")


def print_document(doc: Mapping[str, Any], output: Output) -> None:
    """A command's result as JSON or YAML on stdout, the same way for every command."""
    if output is Output.YAML:
        console.out(dump_yaml([doc]), highlight=False, end="")
    else:
        console.out(json.dumps(doc, indent=2), highlight=False)


def exit_on_errors(problems: Sequence[Problem]) -> None:
    """For commands that need valid input (schedule, export): any error -> exit 2."""
    errors = errors_only(problems)
    if errors:
        print_problems(errors)
        raise typer.Exit(EXIT_BAD_INPUT)
