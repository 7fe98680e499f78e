"""File-shaped source inputs (a fabric dump, a Slurm topology), kept current as files.

A source reads files exactly as ``tierra discover`` does; this module keeps each input's
file current and says when it changed:

* a **file** (a mounted volume, say) is polled: a change of size or modification time
  makes it hashed, and only a change of content counts;
* a **ConfigMap key** is watched (an informer on that one object) and its data written to
  a private folder (``data`` as text, ``binaryData`` as bytes, so a gzipped dump works),
  then counted as changed when the content differs.

An input that is missing (no such file, no such ConfigMap or key) has an ``error`` and
no path: the source does not run, and so nothing it owns is deleted for it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tierra.kube.client import Kube
from tierra.kube.controller.cache import Signal
from tierra.kube.controller.config import TextInput
from tierra.kube.informer import Event, EventType, Informer
from tierra.kube.resources import CONFIGMAPS

log = logging.getLogger(__name__)
NOT_READ = "not read yet"


class InputFile:
    """One input: ``path`` when it can be read, else ``error``; ``changed`` on new content."""

    def __init__(self, spec: TextInput, *, folder: Path, namespace: str, changed: Signal) -> None:
        self.spec = spec
        self.changed = changed
        self.error = NOT_READ
        self.path: Path | None = None
        self._digest = ""
        self._stat: tuple[int, int] | None = None
        self._namespace = spec.config_map.namespace if spec.config_map else ""
        self._namespace = self._namespace or namespace
        if spec.file is None:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._copy = folder / Path(spec.key).name
        self.synced = asyncio.Event()

    def __str__(self) -> str:
        return str(self.spec)

    def _set(self, data: bytes | None, path: Path | None, error: str) -> None:
        digest = hashlib.sha256(data).hexdigest() if data is not None else ""
        if (digest, error) != (self._digest, self.error):
            self._digest, self.error, self.path = digest, error, path if data is not None else None
            self.changed.set()
        self.synced.set()

    # -- a file ---------------------------------------------------------------------------

    def poll(self) -> None:
        assert self.spec.file is not None
        path = self.spec.file
        try:
            st = path.stat()
        except OSError as exc:
            self._stat = None
            self._set(None, None, f"{path}: {exc.strerror or exc}")
            return
        stat = (st.st_size, st.st_mtime_ns)
        if stat == self._stat and not self.error:
            self.synced.set()
            return
        self._stat = stat
        try:
            data = path.read_bytes()
        except OSError as exc:
            self._set(None, None, f"{path}: {exc.strerror or exc}")
            return
        self._set(data, path, "")

    async def watch_file(self, interval: float) -> None:
        while True:
            self.poll()
            await asyncio.sleep(interval)

    # -- a ConfigMap key ------------------------------------------------------------------

    @property
    def _where(self) -> str:
        name = self.spec.config_map.name if self.spec.config_map else ""
        return f"ConfigMap {self._namespace}/{name}"

    def _on_config_map(self, event: Event[Mapping[str, Any]]) -> None:
        where = self._where
        if event.type is EventType.DELETED or event.obj is None:
            self._set(None, None, f"{where} does not exist")
            return
        key = self.spec.key
        data = event.obj.get("data") or {}
        binary = event.obj.get("binaryData") or {}
        if key in data:
            content = str(data[key]).encode()
        elif key in binary:
            try:
                content = base64.b64decode(str(binary[key]), validate=True)
            except binascii.Error:
                self._set(None, None, f"{where}: binaryData.{key} is not base64")
                return
        else:
            have = ", ".join(sorted([*data, *binary])) or "none"
            self._set(None, None, f"{where} has no key {key!r} (keys: {have})")
            return
        if hashlib.sha256(content).hexdigest() != self._digest:
            tmp = self._copy.with_suffix(".tmp")
            tmp.write_bytes(content)
            tmp.replace(self._copy)
        self._set(content, self._copy, "")

    async def watch_config_map(self, kube: Kube) -> None:
        assert self.spec.config_map is not None
        informer: Informer[Mapping[str, Any]] = Informer(
            kube,
            CONFIGMAPS,
            decode=lambda raw: raw,
            on_event=self._on_config_map,
            namespace=self._namespace,
            field_selector=f"metadata.name={self.spec.config_map.name}",
            name=self._where,
        )
        task = asyncio.create_task(informer.run(), name=self._where)
        try:
            await informer.synced.wait()
            if self.error == NOT_READ:  # listed, and no such ConfigMap was in the list
                self._set(None, None, f"{self._where} does not exist")
            await task
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self, kube: Kube, poll_seconds: float) -> None:
        if self.spec.file is not None:
            await self.watch_file(poll_seconds)
        else:
            await self.watch_config_map(kube)
