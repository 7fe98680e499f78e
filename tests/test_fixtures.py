"""The data files the tests read are in the repository, each with its origin on record."""

from __future__ import annotations

import re
from pathlib import Path

ROW = re.compile(r"^\| (\S+) \| ([^|]+) \| ([^|]+) \| ([0-9a-f]{7,40}) \| ([^|]+) \|", re.M)


def test_every_fixture_has_an_origin_and_every_origin_a_file(fixtures: Path) -> None:
    rows = {m.group(1): m for m in ROW.finditer((fixtures / "SOURCES.md").read_text())}
    files = {
        p.relative_to(fixtures).as_posix()
        for p in fixtures.rglob("*")
        if p.is_file() and p.name != "SOURCES.md"
    }
    assert files, "tests/fixtures is empty"
    assert sorted(files - rows.keys()) == [], "files without a SOURCES.md row"
    assert sorted(rows.keys() - files) == [], "SOURCES.md rows without a file"
    for name, m in rows.items():
        assert m.group(5).strip(), f"{name}: no licence"


def test_fixtures_are_inside_the_repository(fixtures: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    assert fixtures.resolve().is_relative_to(repo)
    for p in fixtures.rglob("*"):
        assert not p.is_symlink(), f"{p} is a symlink: a fresh clone would not have its target"
