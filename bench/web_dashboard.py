"""The dashboard at 10,000 and 100,000 nodes: time to first paint, API latency, server memory.

For each size a busy cluster is generated (``tierra.web.testing.busy_cluster``: a
``superpod`` preset, gangs bound by tierra's own scheduler, a few nodes NotReady or
cordoned, gangs left waiting) and written as one JSON snapshot file. Then, as a user
would run it, ``tierra serve FILE --port 0`` is started in its own process and a real
headless Chromium (Debian's, driven by Playwright) opens the page:

* **startup**: from starting ``tierra serve`` until it prints its URL (reading the file,
  building the store and the view the first page reads);
* **first paint**: from navigation start to the first frame after the icicle is drawn
  (the page's ``tierra-painted`` mark: summary and topology fetched, every domain's
  element built), for the first load and the median of later ones;
  Chromium's own first-contentful-paint is recorded beside it;
* **gangs ready**: from first paint until the gang table is filled (the page asks for
  the gangs after drawing; the server runs its scheduling dry run then);
* **API**: the time of ``/api/topology``, ``/api/hypernodes/<cluster>`` and
  ``/api/gangs`` (warm) from a plain HTTP client, and the topology document's size;
* **server memory**: the serving process's RSS after startup and its peak (VmHWM) after
  every page load and API call;
* **stages** (``web_stages.py``, in this process): read, store, view, the scheduler's
  cache, one dry run and the gang rows, each in wall and CPU seconds.

Reproduce: ``make bench-web`` (or ``python bench/web_dashboard.py``; ``--quick`` runs
10,000 nodes only). Writes bench/results/web_dashboard.{json,md}. Before/after: run it
once with an older checkout first on the path and ``--before LABEL``
(``PYTHONPATH=old/src python bench/web_dashboard.py --before 7b20855``), which writes
web_dashboard.before.json; the table then shows both, measured the same way.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from _machine import machine
from playwright.sync_api import Browser, sync_playwright
from web_stages import measure

from tierra.api import dump_json, encode_hypernode
from tierra.api.node import encode_node
from tierra.api.pod import encode_pod
from tierra.api.podgroup import encode_podgroup
from tierra.web.testing import CHROMIUM, CHROMIUM_FLAGS, busy_cluster, start_serve

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
BEFORE = RESULTS / "web_dashboard.before.json"
LOADS = 4  # page loads per size: the first is cold
MIB = 1 << 20


def write_snapshot(nodes: int, folder: Path) -> tuple[Path, dict[str, Any]]:
    t0 = time.perf_counter()
    snap = busy_cluster("superpod", nodes)
    built = time.perf_counter() - t0
    objects = [
        *(encode_node(n) for n in snap.nodes),
        *(encode_hypernode(h) for h in snap.hypernodes),
        *(encode_podgroup(g) for g in snap.podgroups),
        *(encode_pod(p) for p in snap.pods),
    ]
    path = folder / f"busy-{nodes}.json"
    path.write_text(dump_json(objects))
    facts = {
        "nodes": len(snap.nodes),
        "hypernodes": len(snap.hypernodes),
        "pods": len(snap.pods),
        "bound_pods": sum(1 for p in snap.pods if p.bound),
        "podgroups": len(snap.podgroups),
        "file_bytes": path.stat().st_size,
        "generate_s": built,
    }
    return path, facts


def memory(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    found = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.MULTILINE))
    return {k: int(v) * 1024 for k, v in found.items()}


def page_load(browser: Browser, url: str) -> dict[str, float]:
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready]", timeout=600_000)
        page.wait_for_function("performance.getEntriesByName('tierra-gangs').length > 0")
        mark = "performance.getEntriesByName('{}')[0].startTime"
        painted = page.evaluate(mark.format("tierra-painted"))
        gangs = page.evaluate(mark.format("tierra-gangs"))
        fcp = page.evaluate(
            "(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null"
        )
        gangs_after = (gangs - painted) / 1000
        elements = page.evaluate("document.querySelectorAll('#icicle g.domain').length")
        rows = page.evaluate("document.querySelectorAll('#gang-table tbody tr').length")
        return {
            "first_paint_s": painted / 1000,
            "first_contentful_paint_s": (fcp or float("nan")) / 1000,
            "gangs_after_paint_s": gangs_after,
            "domain_elements": elements,
            "gang_rows": rows,
        }
    finally:
        page.close()


def api_times(url: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=600) as client:
        for name, path in (
            ("topology", "api/topology"),
            ("root", "api/hypernodes/%3Ccluster%3E"),
            ("gangs", "api/gangs"),
        ):
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                r = client.get(path)
                times.append(time.perf_counter() - t0)
                r.raise_for_status()
            out[name] = {"median_s": statistics.median(times), "bytes": len(r.content)}
    return out


def run_size(browser: Browser, nodes: int, folder: Path) -> dict[str, Any]:
    path, facts = write_snapshot(nodes, folder)
    print(f"{nodes:,} nodes: snapshot {facts['file_bytes'] / 1e6:.1f} MB written", flush=True)
    stages = measure(path)
    print(
        "  stages: "
        + ", ".join(f"{k} {v['wall_s']:.2f} s ({v['cpu_s']:.2f} CPU)" for k, v in stages.items()),
        flush=True,
    )
    t0 = time.perf_counter()
    proc, url = start_serve([str(path)])
    startup = time.perf_counter() - t0
    try:
        after_start = memory(proc.pid)
        loads = [page_load(browser, url) for _ in range(LOADS)]
        api = api_times(url)
        peak = memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    warm = loads[1:]
    return {
        **facts,
        "stages": stages,
        "startup_s": startup,
        "first_paint_cold_s": loads[0]["first_paint_s"],
        "first_paint_warm_s": statistics.median(x["first_paint_s"] for x in warm),
        "first_contentful_paint_s": statistics.median(x["first_contentful_paint_s"] for x in loads),
        "gangs_after_paint_cold_s": loads[0]["gangs_after_paint_s"],
        "domain_elements": loads[0]["domain_elements"],
        "gang_rows": loads[0]["gang_rows"],
        "loads": loads,
        "api": api,
        "rss_after_start_bytes": after_start["VmRSS"],
        "rss_bytes": peak["VmRSS"],
        "peak_rss_bytes": peak["VmHWM"],
    }


STAGES = ("read", "store", "view", "cache", "dry run", "gang rows")


def _machine_line(report: dict[str, Any]) -> str:
    m = report["machine"]
    return (
        f"{m['cpu']}, {m['cores']} cores, {m['memory_bytes'] / (1 << 30):.1f} GiB, "
        f"{m['platform']}, Python {m['python']}, Chromium {report['chromium']}; load average "
        f"{m['load_average_at_start']:.2f} at start; {report['date']}"
    )


def _comparison(report: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """Before/after per size: the end-to-end figures, then the stages (CPU seconds, the
    machine being shared: wall seconds move with everyone else's load)."""
    old = {c["nodes"]: c for c in before["sizes"]}
    lines = [
        f"## Before ({before.get('label', 'before')}) and after",
        "",
        "| nodes | startup | first paint, cold | gang table after first paint | "
        "URL to gang table | server RSS after start | server peak RSS |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in report["sizes"]:
        b = old.get(c["nodes"])
        if b is None:
            continue

        def pair(key: str, fmt: str, scale: float = 1.0, c: dict[str, Any] = c, b: Any = b) -> str:
            return f"{b[key] * scale:{fmt}} -> {c[key] * scale:{fmt}}"

        total_b = b["first_paint_cold_s"] + b["gangs_after_paint_cold_s"]
        total_a = c["first_paint_cold_s"] + c["gangs_after_paint_cold_s"]
        lines.append(
            f"| {c['nodes']:,} | {pair('startup_s', '.1f')} s | "
            f"{pair('first_paint_cold_s', '.2f')} s | "
            f"{pair('gangs_after_paint_cold_s', '.2f')} s | "
            f"{b['startup_s'] + total_b:.1f} -> {c['startup_s'] + total_a:.1f} s | "
            f"{pair('rss_after_start_bytes', ',.0f', 1 / MIB)} MiB | "
            f"{pair('peak_rss_bytes', ',.0f', 1 / MIB)} MiB |"
        )
    lines += [
        "",
        "Stages, CPU seconds before -> after (wall seconds after, in brackets):",
        "",
        "| nodes | " + " | ".join(STAGES) + " |",
        "| ---: |" + " ---: |" * len(STAGES),
    ]
    for c in report["sizes"]:
        b = old.get(c["nodes"])
        if b is None or "stages" not in b:
            continue
        cells = []
        for st in STAGES:
            now, was = c["stages"].get(st), b["stages"].get(st)
            cells.append(
                f"{was['cpu_s']:.2f} -> {now['cpu_s']:.2f} ({now['wall_s']:.2f})"
                if now and was
                else "-"
            )
        lines.append(f"| {c['nodes']:,} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Before, every dry run (and every explain) paid `cache` and `dry run` again; after,",
        "`cache` is paid once at start-up and each dry run is a session in `Cache.trial()`",
        "on it, fed what changed. URL to gang table = startup + first paint + gang table.",
        "",
        f"Before: {_machine_line(before)}. After: {_machine_line(report)}.",
        "",
    ]
    return lines


def markdown(report: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    lines = [
        "# Dashboard (`tierra serve`) at scale",
        "",
        "| nodes | HyperNodes | pods (bound) | snapshot | startup | first paint, cold | "
        "first paint, warm | gang table after | /api/topology | server RSS after start | "
        "server peak RSS |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in report["sizes"]:
        topo = c["api"]["topology"]
        lines.append(
            f"| {c['nodes']:,} | {c['hypernodes']:,} | {c['pods']:,} ({c['bound_pods']:,}) | "
            f"{c['file_bytes'] / 1e6:.0f} MB | {c['startup_s']:.1f} s | "
            f"{c['first_paint_cold_s']:.2f} s | {c['first_paint_warm_s']:.2f} s | "
            f"{c['gangs_after_paint_cold_s']:.2f} s | {topo['median_s'] * 1000:.0f} ms, "
            f"{topo['bytes'] / 1e6:.2f} MB | {c['rss_after_start_bytes'] / MIB:,.0f} MiB | "
            f"{c['peak_rss_bytes'] / MIB:,.0f} MiB |"
        )
    lines += [
        "",
        "First paint: navigation start to the first frame after the icicle is drawn (summary",
        "and topology fetched, one SVG group per domain built); cold = the first page load",
        f"after startup, warm = the median of {LOADS - 1} later loads.",
        "Gang table after: from first paint until the gang table is filled (the server's",
        "scheduling dry run, cold). Startup: `tierra serve FILE` until it prints its URL",
        "(reading the JSON snapshot, building the view the first page reads). RSS: the serving",
        "process (VmRSS after start; VmHWM after every load and API call).",
        "",
        "| nodes | /api/hypernodes/<cluster> | /api/gangs (warm) | "
        "Chromium first-contentful-paint |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for c in report["sizes"]:
        lines.append(
            f"| {c['nodes']:,} | {c['api']['root']['median_s'] * 1000:.0f} ms | "
            f"{c['api']['gangs']['median_s'] * 1000:.0f} ms, "
            f"{c['api']['gangs']['bytes'] / 1e6:.1f} MB | "
            f"{c['first_contentful_paint_s'] * 1000:.0f} ms |"
        )
    lines += [
        "",
        "Stages (`bench/web_stages.py`, in the benchmark's process), wall seconds (CPU):",
        "",
        "| nodes | " + " | ".join(STAGES) + " |",
        "| ---: |" + " ---: |" * len(STAGES),
    ]
    for c in report["sizes"]:
        cells = [
            f"{v['wall_s']:.2f} ({v['cpu_s']:.2f})" if (v := c["stages"].get(st)) else "-"
            for st in STAGES
        ]
        lines.append(f"| {c['nodes']:,} | " + " | ".join(cells) + " |")
    lines += ["", f"Machine: {_machine_line(report)}.", ""]
    if before is not None:
        lines += _comparison(report, before)
    lines += [f"Reproduce: `{report['command']}`", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="10,000 nodes only")
    parser.add_argument(
        "--before",
        metavar="LABEL",
        help="write the results as the baseline (an older checkout first on PYTHONPATH)",
    )
    args = parser.parse_args()
    sizes = [10_000] if args.quick else [10_000, 100_000]
    command = "python bench/web_dashboard.py --quick" if args.quick else "make bench-web"
    info = machine()
    print(
        f"machine: {info['cpu']}, {info['cores']} cores; load {info['load_average_at_start']:.2f}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_FLAGS))
        version = browser.version
        for n in sizes:
            r = run_size(browser, n, Path(tmp))
            results.append(r)
            print(
                f"{n:,} nodes, {r['hypernodes']:,} HyperNodes, {r['pods']:,} pods: startup "
                f"{r['startup_s']:.1f} s; first paint {r['first_paint_cold_s']:.2f} s cold, "
                f"{r['first_paint_warm_s']:.2f} s warm; gangs "
                f"{r['gangs_after_paint_cold_s']:.2f} s later; server RSS "
                f"{r['rss_after_start_bytes'] / MIB:,.0f} MiB after start, "
                f"peak {r['peak_rss_bytes'] / MIB:,.0f} MiB",
                flush=True,
            )
        browser.close()
    report = {
        "benchmark": "web_dashboard",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "command": command,
        "machine": info,
        "chromium": version,
        "sizes": results,
    }
    print(f"reproduce: {command}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.before:
        report["label"] = args.before
        BEFORE.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {BEFORE}")
        return
    (RESULTS / "web_dashboard.json").write_text(json.dumps(report, indent=2) + "\n")
    before = json.loads(BEFORE.read_text()) if BEFORE.is_file() else None
    (RESULTS / "web_dashboard.md").write_text(markdown(report, before))
    print(f"wrote {RESULTS / 'web_dashboard.json'} and .md")


if __name__ == "__main__":
    main()
