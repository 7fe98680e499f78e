"""Fixtures for the discovery tests."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def selene_dump(fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Selene compute fabric dump, un-gzipped once (tests cut it up)."""
    out = tmp_path_factory.mktemp("selene") / "selene.out"
    src = fixtures / "ibnetdiscover" / "selene-compute-hdr-3tier.out.gz"
    out.write_bytes(gzip.decompress(src.read_bytes()))
    return out
