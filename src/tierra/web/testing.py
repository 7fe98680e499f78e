"""What the dashboard's tests and benchmark share: a busy cluster, Chromium, a server process.

``busy_cluster`` is a generated topology with gangs bound by tierra's own scheduler. The
dashboard's browser tests, its screenshots and its benchmark all draw this one, so
what the README shows is what the tests checked. ``busy_cluster`` takes a preset of
``tierra.sim.clusters``, submits training gangs of 1 to 32 pods (whole 8-GPU nodes, or
half nodes) with tier constraints until about ``fill`` of the GPUs are asked for, lets a
scheduling session bind them, then marks a few nodes NotReady or cordoned and adds gangs
that cannot fit, so the picture has every state: used, free, unavailable, degraded,
pending with a reason. Deterministic for a seed.

``CHROMIUM`` and ``CHROMIUM_FLAGS`` launch Debian's Chromium headless with no network of
its own (Playwright's browser download cannot work here); ``start_serve`` runs
``tierra serve`` as a user would and returns its URL.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tierra.api.node import Condition, Node
from tierra.api.pod import Phase, Pod
from tierra.api.podgroup import PodGroup
from tierra.api.snapshot import Snapshot
from tierra.scheduler import schedule
from tierra.scheduler.testing import pod, podgroup, topology
from tierra.sim.clusters import build_cluster

GPU = "nvidia.com/gpu"
CHROMIUM = Path(os.environ.get("TIERRA_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
SIZES = ((1, 8), (2, 6), (4, 5), (8, 4), (16, 3), (32, 1))  # (pods, weight)


def _gang(name: str, size: int, gpus: int, tier: int | None) -> tuple[PodGroup, list[Pod]]:
    nt = topology("hard", tier) if tier is not None else None
    pg = podgroup(name, size, network_topology=nt)
    cpu, memory = (96, "1Ti") if gpus == 8 else (48, "512Gi")
    pods = [pod(f"{name}-{k}", group=name, gpu=gpus, cpu=cpu, memory=memory) for k in range(size)]
    return pg, pods


def busy_cluster(
    preset: str = "superpod",
    nodes: int = 256,
    *,
    seed: int = 1,
    fill: float = 0.8,
    finished: float = 0.2,
    unhealthy: int = 3,
) -> Snapshot:
    """``nodes`` nodes of ``preset``, about ``fill`` of their GPUs asked for by gangs; of
    those bound, a ``finished`` share are then left out (done), so free room is scattered."""
    cluster = build_cluster(preset, nodes)
    rng = random.Random(seed)
    total = sum(n.allocatable.get(GPU, 0) for n in cluster.nodes) // 1000
    groups: list[PodGroup] = []
    pods: list[Pod] = []
    asked = 0
    sizes, weights = zip(*SIZES, strict=True)
    while asked < fill * total:
        size = rng.choices(sizes, weights)[0]
        gpus = 8 if size > 1 or rng.random() < 0.5 else 4
        tier = 1 if size <= 8 else 2
        pg, members = _gang(f"train-{len(groups):04d}", size, gpus, tier)
        groups.append(pg)
        pods.extend(members)
        asked += size * gpus
    snap = Snapshot(
        nodes=cluster.nodes,
        hypernodes=cluster.hypernodes,
        pods=tuple(pods),
        podgroups=tuple(groups),
    )
    result = schedule(snap)
    placed = {b.pod: b.node for b in result.bindings}
    bound_gangs = {p.group_name for p in pods if p.key in placed}
    bound_gangs -= set(rng.sample(sorted(bound_gangs), int(finished * len(bound_gangs))))
    pods = [
        replace(p, node_name=placed[p.key], phase=Phase.RUNNING)
        for p in pods
        if p.key in placed and p.group_name in bound_gangs
    ]
    groups = [g for g in groups if g.name in bound_gangs]
    # Gangs left waiting: one too wide for any tier-1 domain, one asking more than is free.
    waiting: list[tuple[str, int, int | None]] = [("wide-0000", 64, 1), ("huge-0000", nodes, None)]
    for name, size, limit in waiting:
        pg, members = _gang(name, size, 8, limit)
        groups.append(pg)
        pods.extend(members)
    # A few nodes that cannot take pods: NotReady, and one cordoned.
    down = rng.sample(range(len(cluster.nodes)), min(unhealthy, len(cluster.nodes)))
    node_list: list[Node] = list(cluster.nodes)
    for k, i in enumerate(sorted(down)):
        n = node_list[i]
        if k == 0 and unhealthy > 1:
            node_list[i] = replace(n, unschedulable=True)
        else:
            node_list[i] = replace(n, conditions=(Condition("Ready", "False", "KubeletNotReady"),))
    return Snapshot(
        nodes=tuple(node_list),
        hypernodes=cluster.hypernodes,
        pods=tuple(pods),
        podgroups=tuple(groups),
    )


def start_serve(args: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """``tierra serve ARGS --port 0`` in a process of its own, and the URL it printed.

    Raises ``RuntimeError`` with its output if it exits instead; the caller stops it."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tierra.cli import main; main()",
            "serve",
            *args,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://[\d.]+:\d+/", line)
    if found is None:
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"tierra serve did not start: {line}{err}")
    return proc, found.group(0)
