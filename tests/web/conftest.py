"""The dashboard in a real headless Chromium: Debian's, driven by Playwright for Python.

One browser serves the whole session (starting one takes a second); each test opens its
own page. Playwright's own browser download needs a network this machine does not have,
so the system Chromium is launched by path (``make test`` installs it with apt-get).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("TIERRA_CHROMIUM", "/usr/bin/chromium"))
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: `make test` installs Debian's chromium with apt-get")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh page (1400 x 900) that fails the test on any script error."""
    errors: list[str] = []
    pg = browser.new_page(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    pg.close()
    assert not errors, f"script errors on the page: {errors}"
