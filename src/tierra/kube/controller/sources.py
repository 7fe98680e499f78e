"""Each configured source, live: what makes it run again, and running it.

A source runs exactly as ``tierra discover`` runs it (the same parsers, the same
options); only its input arrives differently:

* ``labels`` and ``dra``: the Nodes / ResourceSlices the controller's informers hold; run
  again when a label they read, a Node or a slice changes;
* ``ibnetdiscover``, ``slurm`` and ``ufm`` with a saved response: files or ConfigMap keys
  (``inputs``), run again when their content changes;
* ``ufm`` with ``url``: asked every ``interval``, with the credentials read from the
  Secret each time (a rotated password is picked up without a restart).

``discover`` raises (``InputError``, ``ConfigError``, ``ApiError``) when the source cannot
produce a trustworthy result; the reconciler then writes nothing for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

from tierra.discovery import dra, labels, presets, registry, ufm
from tierra.discovery.export_formats import KAI_API, KUEUE_API
from tierra.discovery.result import MANAGED_BY, Discovery
from tierra.discovery.ufm_client import UfmClient, UfmError, credentials_from_mapping
from tierra.errors import InputError, Origin
from tierra.kube.client import Kube
from tierra.kube.controller.cache import ANY_LABEL, ControllerCache, Signal
from tierra.kube.controller.config import SourceConfig, SourceKind
from tierra.kube.controller.export_changes import EXPORT_OWNER
from tierra.kube.controller.inputs import InputFile
from tierra.kube.resources import KAI_TOPOLOGIES, KUEUE_TOPOLOGIES, SECRETS, Resource

KUEUE_FLAVORS = Resource("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False)


class LiveSource:
    """One configured source; ``changed`` says when to run it again."""

    def __init__(
        self,
        config: SourceConfig,
        *,
        cache: ControllerCache,
        kube: Kube,
        folder: Path,
        namespace: str,
    ) -> None:
        self.config = config
        self.cache = cache
        self.kube = kube
        self.namespace = namespace
        self.changed = cache.topology if config.live else Signal()
        self.inputs = [
            InputFile(
                spec,
                folder=folder / f"{config.owner}-{i}",
                namespace=namespace,
                changed=self.changed,
            )
            for i, spec in enumerate(config.inputs)
        ]

    @property
    def name(self) -> str:
        return self.config.owner

    def watchers(self) -> list[Coroutine[Any, Any, None]]:
        """What keeps the inputs current (run for as long as the source is configured)."""
        out = [i.run(self.kube, self.config.poll_seconds) for i in self.inputs]
        if self.config.kind is SourceKind.UFM and self.config.url:
            out.append(self._tick(self.config.interval_seconds))
        return out

    async def _tick(self, interval: float) -> None:
        while True:
            self.changed.set()
            await asyncio.sleep(interval)

    async def inputs_synced(self) -> None:
        for i in self.inputs:
            await i.synced.wait()

    async def discover(self) -> Discovery:
        cfg = self.config
        if cfg.kind is SourceKind.LABELS:
            return await self._labels()
        if cfg.kind is SourceKind.DRA:
            slices = list(self.cache.slices.values())
            if not slices:
                raise InputError("no ResourceSlice objects (resource.k8s.io) in the cluster")
            return dra.discover_dra(slices, owner=cfg.owner, prefix=cfg.prefix or "dra-clique")
        if cfg.kind is SourceKind.UFM and cfg.url:
            return await self._ufm()
        missing = [f"{i}: {i.error}" for i in self.inputs if i.path is None]
        if missing:
            raise InputError("; ".join(missing))
        paths = [i.path for i in self.inputs if i.path is not None]
        return await asyncio.to_thread(registry.run, cfg.kind, cfg.request(paths))

    async def _labels(self) -> Discovery:
        cfg = self.config
        topologies = list(cfg.topologies)
        if cfg.object_preset:
            found = await self._object_topologies(cfg.object_preset)
            topologies += labels.with_tier_names(found, cfg.tier_names, strict=False)
        nodes = self.cache.node_list()
        return labels.discover_labels(nodes, topologies, owner=cfg.owner, prefix=cfg.prefix)

    async def _object_topologies(self, flavour: str) -> list[labels.LabelTopology]:
        """The levels of the cluster's Kueue or KAI Topology objects (not tierra's own
        exports: reading back what tierra wrote would only echo it)."""
        resources = [KUEUE_TOPOLOGIES, KUEUE_FLAVORS] if flavour == "kueue" else [KAI_TOPOLOGIES]
        docs: list[tuple[Origin, Mapping[str, Any]]] = []
        for r in resources:
            body = await self.kube.get(r.path(), what=f"list {r.name}")
            for i, item in enumerate(body.get("items") or []):
                item.setdefault("apiVersion", KUEUE_API if flavour == "kueue" else KAI_API)
                item.setdefault("kind", r.kind)
                labels_of = (item.get("metadata") or {}).get("labels") or {}
                if labels_of.get(MANAGED_BY) == EXPORT_OWNER:
                    continue
                docs.append((Origin(f"the cluster's {r.name}", 1, i), item))
        return list(presets.topologies_from_objects(flavour, docs))

    async def _ufm(self) -> Discovery:
        cfg = self.config
        assert cfg.url is not None and cfg.credentials is not None
        ns = cfg.credentials.namespace or self.namespace
        where = f"Secret {ns}/{cfg.credentials.name}"
        secret = await self.kube.get(SECRETS.path(ns, cfg.credentials.name), what=f"read {where}")
        creds = credentials_from_mapping({**secret, "kind": "Secret"}, where)
        verify: bool | str = False if cfg.insecure else (str(cfg.ca_file) if cfg.ca_file else True)

        def fetch() -> tuple[str, str]:
            with UfmClient(
                cfg.url or "", creds, timeout=cfg.timeout, retries=cfg.retries, verify=verify
            ) as client:
                return client.get_ports(), client.ports_url

        try:
            text, origin = await asyncio.to_thread(fetch)
        except UfmError as exc:
            raise InputError(str(exc)) from None
        return ufm.discover_ufm(
            text,
            origin=origin,
            owner=cfg.owner,
            prefix=cfg.prefix or "ufm",
            host_pattern=cfg.host_pattern,
        )


def label_keys(sources: list[SourceConfig]) -> frozenset[str]:
    """Every Node label the live label sources read (levels and selectors)."""
    out: set[str] = set()
    for s in sources:
        if s.kind is not SourceKind.LABELS:
            continue
        if s.object_preset:
            return frozenset({ANY_LABEL})  # levels come from objects: any label may matter
        for t in s.topologies:
            out.update(lv.key for lv in t.levels)
            for sel in t.selectors:
                out.update(sel.match_labels)
                out.update(r.key for r in sel.match_expressions)
    return frozenset(out)
