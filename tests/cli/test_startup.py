"""The command line starts fast because a command imports only what it uses.

Timing is a benchmark (bench/cli_startup.py), never a test; what is tested is the cause:
which modules each command, run as a user runs it (the installed script, a fresh
process), loads.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import tierra
from tierra.cli import Commands

REPO = Path(__file__).resolve().parents[2]
TIERRA = Path(sys.executable).parent / "tierra"
EXAMPLE = REPO / "examples" / "canonical.yaml"  # a topology: validate needs no scheduler
TRAINING = REPO / "examples" / "scheduler" / "training.yaml"  # gangs: validate judges them
NEVER_FOR_OFFLINE = ("scipy", "httpx", "tierra.sim", "kubernetes_asyncio", "tierra.kube")


def imported(*args: str) -> tuple[int, str, set[str]]:
    """Exit status, stdout, and every module ``tierra ARGS`` imported (``-X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(TIERRA), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }
    return done.returncode, done.stdout, modules


def loaded(modules: set[str], *packages: str) -> list[str]:
    return sorted(p for p in packages if any(m == p or m.startswith(p + ".") for m in modules))


def test_help_lists_every_command_and_imports_none() -> None:
    code, out, modules = imported("--help")
    assert code == 0
    for entry in Commands.lazy:
        assert f"  {entry.name} " in out
    assert "--version" in out
    heavy = ("numpy", "yaml", "rich", "pydantic", "re2", "tierra.api", "tierra.topology")
    assert loaded(modules, *heavy, *NEVER_FOR_OFFLINE) == []
    assert not [m for m in modules if m.startswith("tierra.cli.") and m != "tierra.cli.lazy"]


def test_version_is_the_installed_one() -> None:
    code, out, modules = imported("--version")
    assert (code, out) == (0, f"tierra {importlib.metadata.version('tierra')}\n")
    assert out.split()[1] == tierra.__version__
    assert loaded(modules, "numpy", "yaml", "rich") == []


@pytest.mark.parametrize(
    ("args", "uses", "never"),
    [
        (("validate", str(EXAMPLE)), ("numpy", "yaml"), ("tierra.discovery", "tierra.scheduler")),
        (("validate", str(TRAINING)), ("tierra.scheduler",), ("tierra.discovery",)),
        (("tree", str(EXAMPLE)), ("numpy", "rich"), ("tierra.discovery", "tierra.scheduler")),
        (("schedule", str(EXAMPLE)), ("tierra.scheduler",), ("tierra.discovery",)),
        (
            ("discover", "slurm", str(REPO / "tests/fixtures/slurm/slurm-doc-tree-linkspeed.conf")),
            ("tierra.discovery.slurm",),
            ("tierra.scheduler",),
        ),
    ],
)
def test_a_command_imports_what_it_uses(
    args: tuple[str, ...], uses: tuple[str, ...], never: tuple[str, ...]
) -> None:
    code, _, modules = imported(*args)
    assert code == 0
    assert loaded(modules, *uses) == sorted(uses)
    assert loaded(modules, *never, *NEVER_FOR_OFFLINE) == []
    others = {e.module for e in Commands.lazy} - {f"tierra.cli.{args[0]}"}
    assert sorted(others & modules) == []


def test_the_listed_summaries_are_the_commands_own() -> None:
    """The help list is written in the table (so listing imports nothing); it must say
    what each command's docstring says."""
    for entry in Commands.lazy:
        function = getattr(importlib.import_module(entry.module), entry.function)
        first = " ".join(function.__doc__.split("\n\n")[0].split())
        assert entry.summary == first, entry.name
