"""Commands imported when they run, so ``tierra --help`` answers at once.

Each command's module imports what the command needs (numpy, the scheduler, the
simulator with scipy, httpx, the Kubernetes client); importing them all took about a
second before the first line of help. The group lists commands from a table of
``Lazy`` entries (name, module, function, one-line help) and imports a module only
when its command is resolved: to run it or to print its own ``--help``.

The one-line help is written in the table so that listing commands imports nothing;
a test checks that it matches the first line of each command's docstring.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click as click
from typer.core import TyperGroup


@dataclass(frozen=True, slots=True)
class Lazy:
    """A command by where it lives: ``module.function``, with its one-line help."""

    name: str
    module: str
    function: str
    summary: str

    def load(self) -> click.Command:
        """The click command typer makes from the function (its module imported now)."""
        function = getattr(importlib.import_module(self.module), self.function)
        app = typer.Typer(add_completion=False, rich_markup_mode=None)
        app.command(self.name)(function)
        command = typer.main.get_command(app)
        command.name = self.name
        return command


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands: lazy ones load on first lookup; eager ones are kept as given."""

    def __init__(self, lazy: Sequence[Lazy], eager: Mapping[str, click.Command]) -> None:
        self.lazy = {entry.name: entry for entry in lazy}
        self.loaded: dict[str, click.Command] = dict(eager)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self.loaded and name in self.lazy:
            self.loaded[name] = self.lazy[name].load()
        return self.loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.lazy.pop(name, None)
        self.loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self.lazy
        yield from (name for name in self.loaded if name not in self.lazy)

    def __len__(self) -> int:
        return len(self.lazy.keys() | self.loaded.keys())


class LazyGroup(TyperGroup):
    """A typer group whose ``commands`` table loads each command when it is looked up."""

    lazy: Sequence[Lazy] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.lazy, self.commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the table's summaries: printing help loads no command."""
        table = self.commands
        assert isinstance(table, _Commands)
        rows = []
        for name in table:
            if name in table.lazy and name not in table.loaded:
                rows.append((name, table.lazy[name].summary))
            elif not table[name].hidden:
                rows.append((name, table[name].get_short_help_str()))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
