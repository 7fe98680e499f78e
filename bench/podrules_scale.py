"""What kube-scheduler's pod filters cost tierra: pods/s with and without them.

At 10,000 GPU nodes (a fat tree as ``scheduler_scale.py`` builds, each node labelled
with its hostname and one of 16 zones) with 20,000 bound pods (two per node) of 2,000 apps already
placed (one in ten holding required anti-affinity by hostname, so the symmetric check
has terms to test), one session each on a fresh store over:

* ``plain_without_podrules``: 2,000 lone pods without rules, the pod rules taken out
  of the registry (the baseline);
* ``plain``: the same pods with the pod rules registered (what their hooks cost);
* ``anti_spread``: 2,000 lone pods, 200 apps of 10 replicas, each with required
  anti-affinity by hostname on its app and a DoNotSchedule spread by zone (maxSkew 1);
* ``plain_with_holders``: the plain pods, but the placed pods' anti-affinity terms must
  be tested against each (the symmetric direction);
* ``gangs_volumes``: 100 gangs of 8 pods, each pod with a WaitForFirstConsumer claim of
  a provisioner limited by ``allowedTopologies`` to 4 zones, beside 800 plain-gang pods;
* ``preferences``: the 2,000 lone replicas with, instead of rules, preferences: anti-
  affinity by hostname on their app (weight 100), ScheduleAnyway spread by zone and a
  preferred zone (node affinity) -- what scoring them as kube-scheduler does costs;
* ``gangs_preferences``: the 100 gangs of 8, each pod preferring a zone.

Reproduce: ``python bench/podrules_scale.py`` (``--nodes N`` for another size). Writes
bench/results/podrules_scale.{json,md}. Pods/s is of session time.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _machine import machine

from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.meta import ObjectMeta
from tierra.api.node import Node
from tierra.api.pod import NodeSelectorTerm, Pod
from tierra.api.pod_rules import (
    PlacementRules,
    PodAffinityTerm,
    PreferredNodeTerm,
    SpreadConstraint,
)
from tierra.api.storage import PersistentVolumeClaim, StorageClass
from tierra.scheduler import ClusterStore, Memory, SchedulerConfig, run_session
from tierra.scheduler.constraints.registry import DEFAULT
from tierra.scheduler.podrules.book import book_of
from tierra.scheduler.podrules.constraints import CONSTRAINTS as POD_RULES
from tierra.scheduler.testing import fat_tree, pod, podgroup

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def labelled(nodes: list[Node]) -> list[Node]:
    out = []
    for i, n in enumerate(nodes):
        labels = {**n.labels, HOST: n.name, ZONE: f"z{i * 16 // len(nodes):02d}"}
        out.append(replace(n, meta=replace(n.meta, labels=labels)))
    return out


def anti(app: str) -> PodAffinityTerm:
    return PodAffinityTerm(HOST, LabelSelector({"app": app}))


def with_rules(p: Pod, rules: PlacementRules) -> Pod:
    return replace(p, rules=rules)


def background(nodes: list[Node]) -> list[Pod]:
    out = []
    for i in range(min(20_000, 2 * len(nodes))):
        app = f"bg{i % 2000:04d}"
        p = pod(f"bg-{i:05d}", gpu=1, cpu=2, memory="8Gi", labels={"app": app})
        p = replace(p, node_name=nodes[(i * 7) % len(nodes)].name)
        if i % 10 == 0:
            p = with_rules(p, PlacementRules(anti_affinity=(anti(app),)))
        out.append(p)
    return out


def replicas(rules: bool) -> list[Pod]:
    out = []
    for i in range(2_000):
        app = f"web{i // 10:03d}"
        p = pod(f"web-{i:05d}", gpu=1, cpu=2, memory="8Gi", labels={"app": app})
        if rules:
            spread = SpreadConstraint(1, ZONE, "DoNotSchedule", LabelSelector({"app": app}))
            p = with_rules(p, PlacementRules(anti_affinity=(anti(app),), spread=(spread,)))
        out.append(p)
    return out


def preferring(p: Pod, app: str, zone: int) -> Pod:
    near = PreferredNodeTerm(
        10, NodeSelectorTerm((Requirement(ZONE, Operator.IN, (f"z{zone:02d}",)),))
    )
    apart = PodAffinityTerm(HOST, LabelSelector({"app": app}), weight=100)
    spread = SpreadConstraint(1, ZONE, "ScheduleAnyway", LabelSelector({"app": app}))
    rules = PlacementRules(
        preferred_anti_affinity=(apart,), spread=(spread,), preferred_nodes=(near,)
    )
    return with_rules(p, rules)


def preferred_replicas() -> list[Pod]:
    return [preferring(p, str(p.meta.labels["app"]), i % 16) for i, p in enumerate(replicas(False))]


def session(
    nodes: list[Node], hns: Any, placed: list[Pod], pending: list[Pod], **kw: Any
) -> dict[str, Any]:
    store = ClusterStore(nodes=nodes, hypernodes=hns)
    with store.batch():
        for p in placed:
            store.upsert_pod(p)
        for obj in kw.get("storage", ()):
            book_of(store).upsert(obj)
        for pg in kw.get("podgroups", ()):
            store.upsert_podgroup(pg)
        for p in pending:
            store.upsert_pod(p)
    gc.collect()
    config = kw.get("config", SchedulerConfig())
    t, cpu = time.perf_counter(), time.process_time()
    result = run_session(store, config, memory=Memory())
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    return {
        "pods": len(pending),
        "pods_bound": len(result.bindings),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "pods_per_s": round(len(result.bindings) / seconds, 1),
        "pods_per_cpu_s": round(len(result.bindings) / max(cpu, 1e-9), 1),
        "waiting": len(result.unschedulable),
    }


def gangs_with_volumes(volumes: bool) -> tuple[list[Pod], list[Any], list[Any]]:
    pods, pgs, storage = [], [], []
    sc = StorageClass(
        meta=ObjectMeta(name="zonal"),
        provisioner="csi.example.com",
        binding_mode="WaitForFirstConsumer",
        allowed_topologies=(),
    )
    storage.append(sc)
    for g in range(100):
        pgs.append(podgroup(f"job{g:03d}", 8))
        for k in range(8):
            p = pod(f"job{g:03d}-{k}", group=f"job{g:03d}", gpu=8, cpu=16, memory="64Gi")
            if volumes:
                claim = f"ckpt-{g:03d}-{k}"
                storage.append(
                    PersistentVolumeClaim(
                        meta=ObjectMeta(name=claim, namespace="default"),
                        storage_class="zonal",
                        access_modes=("ReadWriteOnce",),
                    )
                )
                p = with_rules(p, PlacementRules(claims=(claim,)))
            pods.append(p)
    return pods, pgs, storage


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10_000)
    args = ap.parse_args()
    nodes, hns = fat_tree(args.nodes)
    nodes = labelled(nodes)
    bg = background(nodes)
    plain_bg = [replace(p, rules=None) for p in bg]
    without = replace(
        SchedulerConfig(), constraints=tuple(c for c in DEFAULT if c not in POD_RULES)
    )
    runs: dict[str, Any] = {
        "plain_without_podrules": session(nodes, hns, plain_bg, replicas(False), config=without),
        "plain": session(nodes, hns, plain_bg, replicas(False)),
        "anti_spread": session(nodes, hns, plain_bg, replicas(True)),
        "plain_with_holders": session(nodes, hns, bg, replicas(False)),
        "anti_spread_with_holders": session(nodes, hns, bg, replicas(True)),
    }
    pods, pgs, _ = gangs_with_volumes(False)
    runs["gangs_plain"] = session(nodes, hns, [], pods, podgroups=pgs)
    pods, pgs, storage = gangs_with_volumes(True)
    runs["gangs_volumes"] = session(nodes, hns, [], pods, podgroups=pgs, storage=storage)
    runs["preferences"] = session(nodes, hns, plain_bg, preferred_replicas())
    pods, pgs, _ = gangs_with_volumes(False)
    near = [preferring(p, "none", i // 8 % 16) for i, p in enumerate(pods)]
    runs["gangs_preferences"] = session(nodes, hns, [], near, podgroups=pgs)
    report = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "nodes": args.nodes,
        "runs": runs,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "podrules_scale.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        f"# pod rules at {args.nodes} nodes ({report['when']})",
        "",
        "| run | pods | bound | s | pods/s | CPU s | pods/CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        lines.append(
            f"| {name} | {r['pods']} | {r['pods_bound']} | {r['seconds']} | {r['pods_per_s']} "
            f"| {r['cpu_seconds']} | {r['pods_per_cpu_s']} |"
        )
    (RESULTS / "podrules_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
