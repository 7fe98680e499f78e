"""``tierra snapshot``: what the scheduler reads from a live cluster, as snapshot files.

One JSON ``kind: List`` file per kind (JSON is YAML, and loads several times faster than
YAML at 100,000 pods): ``nodes.json``, ``pods.json``, ``hypernodes.json`` (both groups),
``podgroups.json`` (Volcano's and the Workload API's), ``queues.json``,
``priorityclasses.json``. ``tierra schedule``, ``explain`` and ``simulate --cluster`` read
the folder's files as they read any snapshot, so a user can replay their cluster offline.

Objects are written as the API returns them, less ``metadata.managedFields`` (bookkeeping
of field owners, often the largest part of an object and never read by tierra). Lists are
paginated and streamed to a temporary file per kind, renamed into place only when the
whole kind was read: an interrupted dump leaves no half-written file behind. A kind the
server does not serve (a CRD not installed, the alpha Workload API off) is an empty list.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tierra.kube import resources as r
from tierra.kube.client import Kube

FILES: dict[str, tuple[r.Resource, ...]] = {
    "nodes.json": (r.NODES,),
    "pods.json": (r.PODS,),
    "hypernodes.json": r.HYPERNODES,
    "podgroups.json": (r.VOLCANO_PODGROUPS, r.WORKLOAD_PODGROUPS),
    "queues.json": (r.VOLCANO_QUEUES,),
    "priorityclasses.json": (r.PRIORITY_CLASSES,),
    # what the pod rules read (volumes, namespace selectors): the same verdicts offline
    "storage.json": (
        r.PVCS,
        r.PVS,
        r.STORAGE_CLASSES,
        r.CSINODES,
        r.CSIDRIVERS,
        r.CSI_CAPACITIES,
    ),
    "namespaces.json": (r.NAMESPACES,),
    "deviceclasses.json": (r.DEVICE_CLASSES,),
    "resourceclaims.json": (r.RESOURCE_CLAIMS, r.RESOURCE_CLAIM_TEMPLATES),
    "resourceslices.json": (r.RESOURCE_SLICES,),
}


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    counts: dict[str, int]  # resource name -> objects written (absent: not served)


def _clean(item: dict[str, Any], resource: r.Resource) -> dict[str, Any]:
    item.setdefault("apiVersion", resource.api_version)
    item.setdefault("kind", resource.kind)
    md = item.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)
    return item


async def _write_kind(
    kube: Kube,
    out: IO[str],
    resource: r.Resource,
    *,
    namespace: str | None,
    first: bool,
    progress: Callable[[str, int], None],
) -> tuple[int, bool]:
    count, token = 0, None
    while True:
        body = await kube.get(
            resource.path(namespace if resource.namespaced else None),
            query={"limit": 500, "continue": token},
            what=f"list {resource.name}",
        )
        for item in body.get("items") or []:
            out.write(("\n" if first else ",\n") + json.dumps(_clean(item, resource)))
            first = False
            count += 1
        progress(resource.name, len(body.get("items") or []))
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return count, first


async def dump(
    kube: Kube,
    folder: Path,
    *,
    namespace: str | None = None,
    progress: Callable[[str, int], None] = lambda name, n: None,
) -> list[Written]:
    """Write the snapshot files into ``folder`` (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    every = [res for group in FILES.values() for res in group]
    served = await r.served(kube, [res for res in every if res not in r.BUILT_IN])
    written: list[Written] = []
    for filename, group in FILES.items():
        path = folder / filename
        tmp = folder / f".{filename}.partial"
        counts: dict[str, int] = {}
        try:
            with tmp.open("w") as out:
                out.write('{"apiVersion": "v1", "kind": "List", "items": [')
                first = True
                for res in group:
                    if res not in r.BUILT_IN and res not in served:
                        continue
                    counts[res.name], first = await _write_kind(
                        kube, out, res, namespace=namespace, first=first, progress=progress
                    )
                out.write("\n]}\n")
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        written.append(Written(path, counts))
    return written


def files_in(folder: Path) -> Sequence[Path]:
    """The snapshot files ``dump`` writes, in a stable order."""
    return [folder / name for name in FILES if (folder / name).is_file()]
