"""The export pass: Kueue and KAI Topology objects, the node labels they read, Slurm's file.

Runs when the primary group's HyperNode specs or the Nodes' labels change (never for
status). The desired export comes from ``export_changes.desired_export`` over every HyperNode
of the primary group; the writes from ``export_changes.label_changes`` and
``export_changes.object_changes``, so only labels tierra listed and objects carrying its
managed-by label are ever changed.

Turning an export off cleans up after it. With the node-label export off, labels tierra
set earlier are still removed (if any Node lists some); that needs the export's ``nodes:
patch`` permission until they are gone. With the Kueue or KAI export off, the first pass
looks for Topology objects of that kind carrying the export's managed-by label and deletes
them (anything else of the kind is never touched); once none is left, or the kind is not
served, or the controller may not list it (an overlay without that export's role: it
could not have written them either), that kind is not asked about again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.discovery.result import MANAGED_BY
from tierra.errors import InputError
from tierra.kube.client import MERGE_PATCH, ApiError, Kube
from tierra.kube.controller.cache import ControllerCache, decode_cached_node
from tierra.kube.controller.config import ControllerConfig
from tierra.kube.controller.export_changes import (
    EXPORT_OWNER,
    Action,
    LabelPatch,
    ObjectChange,
    desired_export,
    label_changes,
    object_changes,
    slurm_configmap,
)
from tierra.kube.controller.metrics import Metrics
from tierra.kube.controller.writes import delete_options
from tierra.kube.resources import CONFIGMAPS, KAI_TOPOLOGIES, KUEUE_TOPOLOGIES, NODES, Resource

log = logging.getLogger(__name__)
CONCURRENCY = 16
SLURM_KEYS = {"conf": "topology.conf", "yaml": "topology.yaml"}


@dataclass(slots=True)
class ExportOutcome:
    writes: int = 0
    conflicts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ExportWriter:
    def __init__(
        self,
        kube: Kube,
        cache: ControllerCache,
        config: ControllerConfig,
        metrics: Metrics,
        namespace: str,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.config = config
        self.metrics = metrics
        self.namespace = namespace
        ex = config.export
        # Kinds whose export is off and whose earlier objects have not been looked for yet.
        self.unswept = {
            r for r, on in ((KUEUE_TOPOLOGIES, ex.kueue), (KAI_TOPOLOGIES, ex.kai)) if not on
        }

    @property
    def wanted(self) -> bool:
        """Anything to do: an export on, or what an earlier export left to remove."""
        return (
            self.config.export.any
            or bool(self.unswept)
            or any(n.owned for n in self.cache.node_labels())
        )

    async def run_once(self) -> ExportOutcome:
        out = ExportOutcome()
        if not self.wanted:
            return out
        for resource in sorted(self.unswept, key=lambda r: r.name):
            await self._sweep(resource, out)
        ex = self.config.export
        slurm = ex.slurm
        try:
            want = desired_export(
                self.cache.hypernode_list(self.config.primary_group),
                self.cache.node_list(),
                kueue=ex.kueue,
                kai=ex.kai,
                slurm_format=slurm.format if slurm else None,
            )
        except InputError as exc:
            out.errors.append(f"export: {exc}")
            log.warning("export not written: %s", exc)
            return out
        labels = want.labels if ex.node_labels else {}
        patches, conflicts = label_changes(labels, self.cache.node_labels(), want.frozen)
        out.conflicts += [str(c) for c in conflicts]
        out.writes += await self._label_patches(patches, out)
        keep = not want.frozen  # a half-applied move deletes no exported object
        if ex.kueue:
            await self._objects(KUEUE_TOPOLOGIES, want.kueue, out, delete=keep)
        if ex.kai:
            immutable = ["spec.levels[].nodeLabel"]
            await self._objects(KAI_TOPOLOGIES, want.kai, out, delete=keep, immutable=immutable)
        if slurm is not None and want.slurm is not None:
            ns = slurm.config_map.namespace or self.namespace
            cm = slurm_configmap(slurm.config_map.name, ns, SLURM_KEYS[slurm.format], want.slurm)
            await self._objects(
                CONFIGMAPS, [cm], out, namespace=ns, fields=("data",), only=slurm.config_map.name
            )
        return out

    async def _sweep(self, resource: Resource, out: ExportOutcome) -> None:
        """Delete the objects an earlier export of ``resource`` left (its export is off)."""
        try:
            body = await self.kube.get(
                resource.path(),
                query={"labelSelector": f"{MANAGED_BY}={EXPORT_OWNER}"},
                what=f"look for exported {resource.name} (export off)",
            )
        except ApiError as exc:
            if exc.status == 0:
                raise
            if exc.status == 403:
                log.info("%s; exported %s, if any, are left", exc, resource.name)
            elif exc.status != 404:  # 404: not served here, so there is none
                out.errors.append(str(exc))
                return
            self.unswept.discard(resource)
            return
        changes, _ = object_changes([], body.get("items") or [], delete=True)
        if await self._change_all(resource, None, changes, out):
            self.unswept.discard(resource)
            if changes:
                log.info("export of %s is off: deleted %d", resource.name, len(changes))

    async def _label_patches(self, patches: Sequence[LabelPatch], out: ExportOutcome) -> int:
        semaphore = asyncio.Semaphore(CONCURRENCY)
        done = 0

        async def one(p: LabelPatch) -> None:
            nonlocal done
            async with semaphore:
                try:
                    raw = await self.kube.request(
                        "PATCH",
                        NODES.path(name=p.node),
                        body=p.body(),
                        content_type=MERGE_PATCH,
                        what=f"label Node/{p.node}",
                    )
                except ApiError as exc:
                    if exc.status == 0:
                        raise
                    if exc.status != 404:
                        out.errors.append(str(exc))
                        self.metrics.write_errors.labels("", "node-labels").inc()
                    return
            if isinstance(raw, dict):
                self.cache.upsert_node(decode_cached_node(raw))
            done += 1
            self.metrics.export_writes.labels("node-labels").inc()

        await asyncio.gather(*(one(p) for p in patches))
        return done

    async def _objects(
        self,
        resource: Resource,
        desired: Sequence[Mapping[str, Any]],
        out: ExportOutcome,
        *,
        namespace: str | None = None,
        fields: Sequence[str] = ("spec",),
        immutable: Sequence[str] = (),
        delete: bool = True,
        only: str | None = None,
    ) -> None:
        what = resource.name
        try:
            if only is not None:
                try:
                    existing = [await self.kube.get(resource.path(namespace, only))]
                except ApiError as exc:
                    if exc.status != 404:
                        raise
                    existing = []
            else:
                existing = (await self.kube.get(resource.path(namespace)))["items"] or []
        except ApiError as exc:
            if exc.status == 0:
                raise
            out.errors.append(f"export {what}: {exc}")
            return
        changes, conflicts = object_changes(
            desired, existing, fields=fields, immutable=immutable, delete=delete
        )
        out.conflicts += [str(c) for c in conflicts]
        await self._change_all(resource, namespace, changes, out)

    async def _change_all(
        self,
        resource: Resource,
        namespace: str | None,
        changes: Sequence[ObjectChange],
        out: ExportOutcome,
    ) -> bool:
        """Apply ``changes`` one by one; False if any failed (each failure is in ``out``)."""
        ok = True
        for change in changes:
            try:
                await self._apply(resource, namespace, change)
            except ApiError as exc:
                if exc.status == 0:
                    raise
                if change.action is Action.DELETE and exc.status == 404:
                    continue  # gone already
                out.errors.append(str(exc))
                self.metrics.write_errors.labels("", resource.name).inc()
                ok = False
                continue
            out.writes += 1
            self.metrics.export_writes.labels(resource.kind).inc()
        return ok

    async def _apply(self, resource: Resource, namespace: str | None, c: ObjectChange) -> None:
        what = f"{c.action} {resource.kind}/{c.name}"
        if c.action in (Action.DELETE, Action.REPLACE):
            await self.kube.request(
                "DELETE",
                resource.path(namespace, c.name),
                body=delete_options(c.resource_version),
                what=what,
            )
        if c.action in (Action.CREATE, Action.REPLACE):
            await self.kube.request("POST", resource.path(namespace), body=c.body, what=what)
        elif c.action is Action.UPDATE:
            await self.kube.request(
                "PATCH",
                resource.path(namespace, c.name),
                body=c.body,
                content_type=MERGE_PATCH,
                what=what,
            )
