"""A user's own workload file (``kind: Workload``), read with field-path errors.

Every problem is reported at once with its file and path (``jobs[3].duration: must be
> 0``); ``check_workload`` adds what only the cluster reveals (an unknown tier name, a
job bigger than the cluster); ``workload_manifest`` writes a workload back out, so a
generated one can be saved, edited and replayed::

    kind: Workload
    jobs:
    - {name: pretrain, arrival: 0, duration: 2h, pods: 16, gpusPerPod: 8, commShare: 0.4,
       topology: {mode: hard, highestTierName: aggregation},
       partitions: {size: 4, topology: {mode: hard, highestTierAllowed: 1}}}
    - {name: llm, duration: 6h, pods: 32, gpusPerPod: 8, topology: {mode: soft}, ranked: true,
       slices: [{tier: 2, size: 16}, {tier: 1, size: 8}], wait: {tier: 2, duration: 4m}}
    - name: chat
      kind: inference
      duration: 1d
      roles: [{name: prefill, pods: 2, gpusPerPod: 8}, {name: decode, pods: 4, gpusPerPod: 8}]
      partitions: {size: 3}
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.files import read_yaml
from tierra.api.podgroup import decode_network_topology
from tierra.errors import InputError, Origin, Problem
from tierra.sim.workloads import (
    API_VERSION,
    KIND,
    BoundedWait,
    JobKind,
    Role,
    SimJob,
    SliceLayer,
    Workload,
)
from tierra.topology.index import TopologyIndex

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _seconds(f: Fields, key: str, *, required: bool, positive: bool) -> float | None:
    raw = f.raw(key)
    if raw is None:
        if required:
            f.problem(key, "is required (seconds, or a number with s, m, h or d)")
        return None
    value: float | None
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, int | float):
        value = float(raw)
    elif isinstance(raw, str) and (m := _DURATION.match(raw)):
        value = float(m.group(1)) * _UNIT[m.group(2)]
    elif isinstance(raw, str) and raw.strip().startswith("-"):
        value = -1.0
    else:
        value = None
    if value is None or not math.isfinite(value):
        f.problem(key, f"expected seconds (a number, or like 90s, 15m, 2h, 1d), got {raw!r}")
        return None
    if positive and value <= 0:
        f.problem(key, f"must be > 0, got {raw!r}")
        return None
    if value < 0:
        f.problem(key, f"must not be negative, got {raw!r}")
        return None
    return value


def _role(f: Fields, default_name: str, *, named: bool) -> Role:
    pods = f.integer("pods", 1, minimum=1)
    gpus = f.integer("gpusPerPod", 0, minimum=0)
    res = f.resources("resources")
    name = (f.string("name", default_name) or default_name) if named else default_name
    if not _NAME.match(name):
        f.problem("name", f"{name!r} is not a DNS label (lower-case letters, digits, '-')")
    return Role(
        name=name,
        pods=pods,
        gpus=gpus,
        cpu=res.get("cpu", 0),
        memory=res.get("memory", 0),
    )


def _job(f: Fields, i: int) -> SimJob | None:
    before = f.report.count
    name = f.string("name", required=True)
    if name and not _NAME.match(name):
        f.problem("name", f"{name!r} is not a DNS label (lower-case letters, digits, '-')")
    kind = JobKind(f.enum("kind", tuple(k.value for k in JobKind), JobKind.TRAINING.value))
    arrival = _seconds(f, "arrival", required=False, positive=False) or 0.0
    duration = _seconds(f, "duration", required=True, positive=True)
    comm = f.number("commShare")
    if comm is not None and not 0 <= comm <= 1:
        f.problem("commShare", f"must be between 0 and 1, got {comm}")
    if f.has("roles"):
        if f.has("pods") or f.has("gpusPerPod"):
            f.problem("roles", "give either roles or pods/gpusPerPod, not both")
        roles = [_role(r, f"role{k}", named=True) for k, r in enumerate(f.objects("roles"))]
        if not roles:
            f.problem("roles", "needs at least one role")
    else:
        roles = [_role(f, "worker" if kind is not JobKind.SINGLE else "main", named=False)]
    real_roles = tuple(roles)
    if len({r.name for r in real_roles}) != len(real_roles):
        f.problem("roles", "role names must be unique")
    topology = decode_network_topology(f.obj("topology"))
    part = f.obj("partitions")
    size = part.integer("size", 0, minimum=1) if part.data else 0
    part_topology = decode_network_topology(part.obj("topology")) if part.data else None
    pods = sum(r.pods for r in real_roles)
    if size and pods % size:
        part.problem("size", f"must divide the job's {pods} pods, got {size}")
    elif size:
        parts = pods // size
        for k, r in enumerate(real_roles):
            if r.pods % parts:
                where = f"roles[{k}].pods" if f.has("roles") else "pods"
                f.problem(where, f"{r.pods} pods do not split evenly into {parts} partitions")
    slices = _slices(f, pods)
    ranked = f.boolean("ranked", False)
    wait = _wait(f, topology is not None)
    if f.report.count > before or duration is None:
        return None
    return SimJob(
        name=name,
        kind=kind,
        arrival=arrival,
        duration=duration,
        roles=real_roles,
        comm_share=comm if comm is not None else (0.3 if pods > 1 else 0.0),
        topology=topology,
        partition_size=size,
        partition_topology=part_topology,
        priority=f.integer("priority", 0),
        queue=f.string("queue", "default") or "default",
        path=f"jobs[{i}]",
        slices=slices,
        ranked=ranked,
        wait=wait,
    )


def _slices(f: Fields, pods: int) -> tuple[SliceLayer, ...]:
    """``slices: [{tier, size}, ...]``, outer first (tierra's ``slices`` annotation): each
    size divides the one above (the pods, for the outer layer), each tier below it."""
    out: list[SliceLayer] = []
    for layer in f.objects("slices"):
        size = layer.integer("size", 0, required=True, minimum=1)
        tier = layer.integer("tier", 0, required=True, minimum=1)
        if not size or not tier:
            continue
        above = out[-1] if out else None
        if (above.size if above else pods) % size:
            what = "the layer above's size" if above else "the job's pods"
            layer.problem("size", f"{size} must divide {what} ({above.size if above else pods})")
        elif above is not None and tier >= above.tier:
            layer.problem("tier", f"must be below the layer above's tier {above.tier}")
        else:
            out.append(SliceLayer(size=size, tier=tier))
    return tuple(out)


def _wait(f: Fields, has_topology: bool) -> BoundedWait | None:
    """``wait: {tier, duration}``: a bounded wait for that tier (needs ``topology``)."""
    w = f.obj("wait")
    if not w.data:
        return None
    tier = w.integer("tier", 0, required=True, minimum=1)
    seconds = _seconds(w, "duration", required=True, positive=True)
    if not has_topology:
        f.problem("wait", "needs the job's topology (a bounded wait narrows its domain search)")
    return BoundedWait(tier=tier, seconds=seconds) if tier and seconds else None


def load_workload(path: str | Path) -> Workload:
    """Read a ``kind: Workload`` YAML file; every problem is reported (``InputError``)."""
    name = str(path)
    raw = read_yaml(path, expected="a workload YAML file")
    return parse_workload(raw, name)


def parse_workload(raw: Any, source: str) -> Workload:
    origin = Origin(source, 1)
    if not isinstance(raw, Mapping):
        raise InputError(Problem(f"expected a {KIND} object with a jobs list", origin, KIND))
    sink: list[Problem] = []
    f = Fields(raw, "", Report(origin, KIND, sink))
    kind = f.string("kind", KIND)
    if kind != KIND:
        f.problem("kind", f"expected {KIND}, got {kind!r}")
    jobs = [_job(jf, i) for i, jf in enumerate(f.objects("jobs", required=True))]
    seen: dict[str, int] = {}
    for i, job in enumerate(jobs):
        if job is None:
            continue
        if job.name in seen:
            f.report.add(f"jobs[{i}].name", f"{job.name!r} is also jobs[{seen[job.name]}]")
        seen.setdefault(job.name, i)
    if not sink and not jobs:
        f.problem("jobs", "needs at least one job")
    if sink:
        raise InputError(sink)
    ordered = sorted((j for j in jobs if j is not None), key=lambda j: (j.arrival, j.name))
    return Workload(jobs=tuple(ordered), source=source)


def check_workload(
    workload: Workload, index: TopologyIndex, gpus: int, node_gpus: int | None = None
) -> list[Problem]:
    """Problems only the cluster reveals: unknown tier names, jobs bigger than the cluster,
    pods bigger than its largest node (``node_gpus``)."""
    origin = Origin(workload.source, 1) if workload.seed is None else None
    problems: list[Problem] = []
    for job in workload.jobs:
        where = job.path or job.name
        for k, role in enumerate(job.roles):
            if node_gpus is not None and role.gpus > node_gpus:
                path = (
                    f"{where}.roles[{k}].gpusPerPod"
                    if len(job.roles) > 1
                    else f"{where}.gpusPerPod"
                )
                problems.append(
                    Problem(
                        f"a pod asks for {role.gpus} GPUs; the largest node has {node_gpus}",
                        origin,
                        KIND,
                        path,
                    )
                )
        for key, nt in (
            ("topology", job.topology),
            ("partitions.topology", job.partition_topology),
        ):
            name = nt.highest_tier_name if nt is not None else None
            if name is not None and index.tier_of_name(name) is None:
                known = sorted({n for t in index.trees for n in t.tier_names})
                problems.append(
                    Problem(
                        f"no tier named {name!r} in the cluster"
                        f" (tier names: {', '.join(known) or 'none'})",
                        origin,
                        KIND,
                        f"{where}.{key}.highestTierName",
                    )
                )
        tiers = [(f"slices[{k}].tier", x.tier) for k, x in enumerate(job.slices)]
        if job.wait is not None:
            tiers.append(("wait.tier", job.wait.tier))
        for key, tier in tiers:
            if tier >= index.root_tier:
                problems.append(
                    Problem(
                        f"tier {tier} is not below the cluster's top (tier {index.root_tier})",
                        origin,
                        KIND,
                        f"{where}.{key}",
                    )
                )
        if job.gpus > gpus:
            problems.append(
                Problem(
                    f"job {job.name} needs {job.gpus} GPUs; the cluster has {gpus}",
                    origin,
                    KIND,
                    where,
                )
            )
    return problems


def workload_manifest(workload: Workload) -> dict[str, Any]:
    """The workload as a file ``load_workload`` reads back (for ``--write-workload``)."""
    jobs = []
    for j in workload.jobs:
        d: dict[str, Any] = {"name": j.name, "kind": str(j.kind), "arrival": j.arrival}
        d["duration"] = j.duration
        if len(j.roles) == 1 and j.roles[0].name in ("worker", "main"):
            d["pods"], d["gpusPerPod"] = j.roles[0].pods, j.roles[0].gpus
        else:
            d["roles"] = [{"name": r.name, "pods": r.pods, "gpusPerPod": r.gpus} for r in j.roles]
        d["commShare"] = j.comm_share
        if j.priority:
            d["priority"] = j.priority
        if j.topology is not None:
            d["topology"] = j.topology.to_dict()
        if j.partition_size:
            part: dict[str, Any] = {"size": j.partition_size}
            if j.partition_topology is not None:
                part["topology"] = j.partition_topology.to_dict()
            d["partitions"] = part
        if j.slices:
            d["slices"] = [{"tier": x.tier, "size": x.size} for x in j.slices]
        if j.ranked:
            d["ranked"] = True
        if j.wait is not None:
            d["wait"] = {"tier": j.wait.tier, "duration": j.wait.seconds}
        jobs.append(d)
    return {"apiVersion": API_VERSION, "kind": KIND, "jobs": jobs}
