"""Golden outputs of the scheduler, for proving a refactor changes no decision.

``tierra schedule -o json`` on every snapshot under ``examples/`` and ``tests/fixtures/``
that schedules (exit 0; the others are listed with their exit status), with and without
the example scheduler config, and ``tierra simulate -o json`` on three small presets
with fixed seeds. ``python hack/golden.py`` writes them to ``tests/scheduler/golden/``;
``tests/scheduler/test_sched_golden.py`` compares the current code with them byte for
byte. Regenerate only when a change of behaviour is intended, and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tierra.cli import app

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "scheduler" / "golden"
CONFIG = ROOT / "examples" / "scheduler" / "config.yaml"
SIM_ARGS = ("--nodes", "96", "--hours", "6", "--load", "1.2", "--no-report", "-j", "1")
SIMS = {  # name -> preset, seed, further options (small enough for seconds each)
    "sim-superpod": ("superpod", "3", ["--policies", "tierra,volcano"]),
    "sim-fattree": ("fattree", "5", ["--policies", "tierra,kueue", "--inference-priority", "5"]),
    "sim-mixed": (
        "mixed",
        "7",
        ["--policies", "tierra", "--inference-priority", "5", "--scheduler-config", str(CONFIG)],
    ),
}


def inputs() -> list[Path]:
    """Every YAML or JSON file under examples/ and tests/fixtures/, in a fixed order."""
    found = [
        p
        for base in ("examples", "tests/fixtures")
        for p in (ROOT / base).rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".yml", ".json")
    ]
    return sorted(found, key=lambda p: p.relative_to(ROOT).as_posix())


def _untimed(doc: Any) -> Any:
    """``doc`` without measured times (``ms_per_*``): they differ from run to run."""
    if isinstance(doc, dict):
        return {k: _untimed(v) for k, v in doc.items() if not k.startswith("ms_")}
    if isinstance(doc, list):
        return [_untimed(v) for v in doc]
    return doc


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout


def outputs() -> Iterator[tuple[str, str]]:
    """``(golden file name, content)`` for every run, computed by the current code."""
    index: list[str] = []
    for path in inputs():
        rel = path.relative_to(ROOT).as_posix()
        for tag, extra in (("", []), ("+config", ["--config", str(CONFIG)])):
            code, out = _run(["schedule", "-o", "json", str(path), *extra])
            index.append(f"{code} {rel}{tag}")
            if code == 0:
                yield "schedule-" + rel.replace("/", "__") + tag + ".json", out
    yield "schedule-index.txt", "\n".join(index) + "\n"
    for name, (preset, seed, more) in SIMS.items():
        args = ["simulate", "--cluster", preset, "--seed", seed, *more]
        code, out = _run([*args, *SIM_ARGS, "-o", "json"])
        text = json.dumps(_untimed(json.loads(out)), indent=2) if code == 0 else out
        yield f"{name}.json", f"exit {code}\n{text}\n"


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for old in GOLDEN.iterdir():
        old.unlink()
    for name, content in outputs():
        (GOLDEN / name).write_text(content)
        print(name, len(content), file=sys.stderr)


if __name__ == "__main__":
    main()
