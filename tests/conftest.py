"""Test fixtures for the whole suite: where the real data files live."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """``tests/fixtures``: real public data files, origins and licences in its SOURCES.md.

    They live in the repository so that a fresh clone, with nothing beside it, passes.
    """
    return FIXTURES


@pytest.fixture(scope="session")
def shared_fixtures(fixtures: Path) -> Path:
    """The old name of ``fixtures``, kept so tests written before the move still run."""
    return fixtures
