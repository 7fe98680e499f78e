"""Test fixtures for the whole suite: where the real data files live; a real browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# -- the dashboard in a real headless Chromium (tests/web, and live mode in tests/kube) --------
# Debian's Chromium, driven by Playwright for Python: Playwright's own browser download needs a
# network this project does not have, so the system browser is launched by path (`make test`
# installs it with apt-get). One browser per test module (two modules use one), each test its
# own page.


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """``playwright.sync_api.Browser`` (imported here: only browser tests need it).

    Module-scoped: Playwright's sync API keeps an event loop running in the main thread
    while it is open, so every later ``asyncio.run`` in the session (the Kubernetes tests)
    would fail with "cannot be called from a running event loop"."""
    from playwright.sync_api import sync_playwright

    from tierra.web.testing import CHROMIUM, CHROMIUM_FLAGS

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: `make test` installs Debian's chromium with apt-get")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_FLAGS))
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page (1400 x 900) that fails the test on any script error."""
    errors: list[str] = []
    pg = browser.new_page(viewport={"width": 1400, "height": 900})
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    pg.close()
    assert not errors, f"script errors on the page: {errors}"
