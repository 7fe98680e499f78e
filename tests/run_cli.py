"""Running ``tierra`` as a user does, for tests (imported as a plain module)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

_runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``tierra ARGS``; never a traceback."""
    result = _runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def one_line(text: str) -> str:
    """``text`` with its whitespace runs as single spaces (rich wraps long messages)."""
    return " ".join(text.split())
