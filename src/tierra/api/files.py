"""Reading a user's file: one place that turns every way it can fail into a clear message.

Snapshots, configuration files, workloads, cost models and discovery inputs all come
from users. Whatever the file, a missing path, a folder, a binary file, broken gzip or
broken YAML gets one line naming the file (and the line, where YAML says) as an
``InputError``: never a traceback.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import yaml

try:  # the C loader is ~10x faster; fall back where libyaml is missing
    from yaml import CSafeLoader as YamlLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as YamlLoader  # type: ignore[assignment]

from tierra.errors import InputError

__all__ = ["YamlLoader", "parse_yaml", "read_text", "read_yaml", "yaml_problem"]


def read_text(path: str | Path, *, expected: str = "a text file", lenient: bool = False) -> str:
    """The file's text (gzip read transparently); ``expected`` words the complaints.

    ``lenient`` replaces bytes that are not UTF-8 instead of refusing the file, for
    tool dumps whose free-text fields (switch descriptions) may hold anything.
    """
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{name}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"{name}: broken gzip data: {exc}") from None
    if b"\x00" in data[:8192]:
        raise InputError(f"{name}: is a binary file, expected {expected}")
    try:
        return data.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: is not UTF-8 text (byte {exc.start})") from None


def yaml_problem(name: str, exc: yaml.YAMLError) -> str:
    """``file: line L column C: invalid YAML: what`` for a parser error."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        what = exc.problem or exc.context or "invalid YAML"
        return f"{name}: {where}invalid YAML: {what}"
    return f"{name}: invalid YAML: {exc}"


def parse_yaml(name: str, text: str) -> Any:
    """One YAML document; broken YAML raises ``InputError`` with the line."""
    try:
        return yaml.load(text, Loader=YamlLoader)
    except yaml.YAMLError as exc:
        raise InputError(yaml_problem(name, exc)) from None
    except RecursionError:
        raise InputError(f"{name}: invalid YAML: nested too deeply") from None


def read_yaml(path: str | Path, *, expected: str = "a YAML file") -> Any:
    """Read and parse one YAML document from a user's file."""
    return parse_yaml(str(path), read_text(path, expected=expected))
