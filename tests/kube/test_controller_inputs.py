"""File-shaped inputs: a change of content (not of timestamps) counts; a missing file,
ConfigMap or key is an error and no path, so the source writes nothing."""

from __future__ import annotations

import asyncio
import base64
import gzip
import os
from pathlib import Path

from tierra.kube.controller.cache import Signal
from tierra.kube.controller.config import ObjectRef, TextInput
from tierra.kube.controller.inputs import InputFile
from tierra.kube.informer import Event, EventType


def test_a_file_counts_as_changed_only_when_its_content_changes(tmp_path: Path) -> None:
    async def body() -> None:
        path = tmp_path / "dump.txt"
        signal = Signal()
        watched = InputFile(
            TextInput(file=path), folder=tmp_path / "x", namespace="ns", changed=signal
        )
        watched.poll()
        assert watched.path is None and "no such file" in watched.error.lower()
        path.write_text("one")
        watched.poll()
        assert watched.path == path and watched.error == ""
        seen = signal.generation
        os.utime(path, ns=(1, 1))  # touched, same content
        watched.poll()
        assert signal.generation == seen
        path.write_text("two")
        watched.poll()
        assert signal.generation == seen + 1
        path.unlink()
        watched.poll()
        assert watched.path is None and signal.generation == seen + 2

    asyncio.run(body())


def test_a_config_map_key_is_copied_and_its_absence_is_an_error(tmp_path: Path) -> None:
    async def body() -> None:
        signal = Signal()
        spec = TextInput(config_map=ObjectRef("fabric"), key="dump.out.gz")
        watched = InputFile(spec, folder=tmp_path / "in", namespace="ns", changed=signal)

        def event(kind: EventType, obj: dict[str, object] | None) -> None:
            watched._on_config_map(Event(kind, "ns/fabric", obj))

        packed = base64.b64encode(gzip.compress(b"Switch 36 ...")).decode()
        event(EventType.ADDED, {"binaryData": {"dump.out.gz": packed}})
        assert watched.path is not None
        assert gzip.decompress(watched.path.read_bytes()) == b"Switch 36 ..."
        assert watched.path.parent.stat().st_mode & 0o077 == 0
        event(EventType.MODIFIED, {"data": {"other": "x"}})
        assert watched.path is None
        assert watched.error == "ConfigMap ns/fabric has no key 'dump.out.gz' (keys: other)"
        event(EventType.MODIFIED, {"binaryData": {"dump.out.gz": "!!"}})
        assert "is not base64" in watched.error
        event(EventType.DELETED, None)
        assert watched.error == "ConfigMap ns/fabric does not exist"
        assert signal.generation == 4

    asyncio.run(body())
