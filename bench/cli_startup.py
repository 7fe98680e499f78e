"""How fast the command line answers: wall time and import time of a few commands.

Targets (DESIGN.md, issue 10): ``tierra --help`` under 0.2 s and ``tierra validate`` on a
small file under 0.4 s, median wall time of 10 runs, on the project's 2-core machine.

Each command runs as a user runs it (the installed ``tierra`` script, a fresh process):
one untimed warm-up (the page cache, ``.pyc`` files), then 10 timed runs. Separately,
``python -X importtime`` over the same command gives the total import time and the
heaviest top-level imports, and the modules it loaded show whether the command pulled in
what it does not use (scipy, httpx, the simulator, the Kubernetes client).

``PYTHONDONTWRITEBYTECODE`` is removed from the commands' environment, so the warm-up
writes tierra's ``.pyc`` files as any first run on a user's machine does.

The machine is shared: the load average at the start is recorded, and timings under
load are higher than on an idle machine.

Reproduce: ``make bench-cli`` (or ``python bench/cli_startup.py``). To measure another
source tree with the same interpreter (the "before" column of the results):
``git archive <commit> src | tar -x -C /tmp/before`` then
``python bench/cli_startup.py --src /tmp/before/src --label "before (<commit>)"``.
Writes bench/results/cli_startup.{json,md}, keeping the runs of other labels.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import machine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SMALL = ROOT / "examples" / "canonical.yaml"  # 8 nodes, 7 HyperNodes, 1 bound pod
GANGS = ROOT / "examples" / "scheduler" / "training.yaml"  # 8 nodes, 4 gangs: scheduler checks
RUNS = 10
TARGETS = {"--help": 0.2, "validate": 0.4}
HEAVY = (
    "numpy",
    "yaml",
    "rich",
    "pydantic",
    "scipy",
    "httpx",
    "kubernetes_asyncio",
    "tierra.sim",
    "re2",
)
COMMANDS: dict[str, list[str]] = {
    "--help": ["--help"],
    "--version": ["--version"],
    "validate": ["validate", str(SMALL)],
    "validate (gangs)": ["validate", str(GANGS)],
    "tree": ["tree", str(SMALL)],
    "schedule --help": ["schedule", "--help"],
}


def tierra_script() -> str:
    """The ``tierra`` console script next to this interpreter (the venv's), else on PATH."""
    here = Path(sys.executable).parent / "tierra"
    found = str(here) if here.exists() else shutil.which("tierra")
    if found is None:
        raise SystemExit("no tierra script found: run `make demo` or `pip install -e .` first")
    return found


def command(args: list[str], *, importtime: bool = False) -> list[str]:
    flags = ["-X", "importtime"] if importtime else []
    return [sys.executable, *flags, tierra_script(), *args]


def wall_times(
    args: list[str], env: dict[str, str], runs: int
) -> tuple[list[float], list[float], int]:
    """Wall seconds and CPU seconds (user + system, the child's) of each run; exit status.

    CPU time is what the command costs whatever else runs: on this shared machine the
    wall time also holds the wait for a core."""
    subprocess.run(command(args), env=env, capture_output=True, check=False)  # warm-up
    times, cpu = [], []
    code = 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command(args), env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        code = done.returncode
    return times, cpu, code


def import_profile(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Total and top-level import times (microseconds) from ``-X importtime``."""
    done = subprocess.run(
        command(args, importtime=True), env=env, capture_output=True, text=True, check=False
    )
    total = 0
    top: list[tuple[int, str]] = []
    modules: set[str] = set()
    for line in done.stderr.splitlines():
        # "import time:       413 |      60385 |       tierra.api" (indent = nesting)
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, field = line.removeprefix("import time:").split("|")
        name = field[1:]
        total += int(self_us)
        modules.add(name.strip())
        if not name.startswith(" "):
            top.append((int(cumulative), name))
    top.sort(reverse=True)
    return {
        "total_us": total,
        "modules": len(modules),
        "top": [{"module": m, "cumulative_us": us} for us, m in top[:8]],
        "heavy_loaded": sorted(
            h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in modules)
        ),
    }


def measure(src: Path | None, runs: int) -> dict[str, Any]:
    env = dict(os.environ)
    # Some sandboxes set it; a user's shell does not: without .pyc files every run would
    # compile tierra's own modules again (the installed packages have theirs from pip).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        # PYTHONPATH comes before the editable install's path entry: this tree's code runs.
        env["PYTHONPATH"] = str(src.resolve())
    out: dict[str, Any] = {}
    for name, args in COMMANDS.items():
        times, cpu, code = wall_times(args, env, runs)
        out[name] = {
            "args": [a.replace(f"{ROOT}/", "") for a in args],  # as run from the checkout
            "exit_status": code,
            "seconds": times,
            "median_s": statistics.median(times),
            "cpu_seconds": cpu,
            "median_cpu_s": statistics.median(cpu),
            "imports": import_profile(args, env),
        }
    return out


def render(report: dict[str, Any]) -> str:
    info = report["machine"]
    lines = [
        "# CLI start-up (wall time of a fresh process, and its imports)",
        "",
        f"- machine: {info['cpu']} ({info['cores']} CPUs, shared), Python {info['python']};"
        f" load average at the start of each run in its column",
        "- command: `python bench/cli_startup.py` (`make bench-cli`); small file:"
        f" `{SMALL.relative_to(ROOT)}` (a topology); with gangs, which validate also judges"
        f" with the scheduler: `{GANGS.relative_to(ROOT)}`",
        f"- {report['timed_runs']} timed runs per command after one warm-up (which writes the"
        " `.pyc` files: `PYTHONDONTWRITEBYTECODE` is unset for the commands); median"
        " wall time (min-max), then the median CPU time (user + system) of the command, which"
        " the load of other processes changes far less. Targets: `--help` < 0.2 s,"
        " `validate` < 0.4 s (median wall time).",
        "",
    ]
    labels = list(report["runs"])
    lines.append("| command | " + " | ".join(labels) + " |")
    lines.append("| --- |" + " ---: |" * len(labels))
    for name, args in COMMANDS.items():
        cells = []
        for label in labels:
            r = report["runs"][label]["commands"].get(name)
            if r is None:
                cells.append("-")
                continue
            t = r["seconds"]
            verdict = ""
            if name in TARGETS:
                verdict = " met" if r["median_s"] < TARGETS[name] else " NOT met"
            status = "" if r["exit_status"] == 0 else f" (exit {r['exit_status']})"
            cells.append(
                f"{r['median_s']:.3f} s ({min(t):.3f}-{max(t):.3f}){verdict}{status};"
                f" CPU {r['median_cpu_s']:.3f} s"
            )
        lines.append(
            f"| `tierra {' '.join(args)}`".replace(str(ROOT) + "/", "")
            + " | "
            + " | ".join(cells)
            + " |"
        )
    lines.append(
        "| load average at start | "
        + " | ".join(
            f"{report['runs'][label]['machine']['load_average_at_start']:.2f}" for label in labels
        )
        + " |"
    )
    lines += ["", "## Imports (`python -X importtime`, one run)", ""]
    for label in labels:
        lines.append(f"### {label}")
        lines.append("")
        lines.append(
            "| command | import time | modules | heavy modules loaded | heaviest top-level |"
        )
        lines.append("| --- | ---: | ---: | --- | --- |")
        for name in COMMANDS:
            r = report["runs"][label]["commands"].get(name)
            if r is None:
                continue
            imp = r["imports"]
            heaviest = ", ".join(
                f"{t['module']} {t['cumulative_us'] / 1000:.0f} ms" for t in imp["top"][:3]
            )
            lines.append(
                f"| `{name}` | {imp['total_us'] / 1000:.0f} ms | {imp['modules']}"
                f" | {', '.join(imp['heavy_loaded']) or 'none'} | {heaviest} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="measure this source tree's tierra package")
    parser.add_argument("--label", default="current", help="the column these results go in")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args()
    path = RESULTS / "cli_startup.json"
    report: dict[str, Any] = (
        json.loads(path.read_text()) if path.exists() else {"benchmark": "cli_startup", "runs": {}}
    )
    info = machine()
    report["machine"] = info
    report["timed_runs"] = args.runs
    report["runs"][args.label] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": info,
        "source": str(args.src) if args.src else "this checkout",
        "commands": measure(args.src, args.runs),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    text = render(report)
    (RESULTS / "cli_startup.md").write_text(text + "\n")
    print(text)
    current = report["runs"][args.label]["commands"]
    met = all(current[name]["median_s"] < limit for name, limit in TARGETS.items())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
