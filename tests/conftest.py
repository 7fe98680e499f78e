"""Shared test fixtures: where the public-cluster data files live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """``<repo>/../shared/fixtures``: CI lays shared/ beside its clone, as for a session."""
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES
