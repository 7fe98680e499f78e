"""Contention through ``tierra schedule`` (issue 21): the example's second gang goes to
the block whose uplinks are free with ``contention`` on, beside the first one off."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scheduler" / "contention"


def blocks(config: Path) -> set[str]:
    args = ["schedule", "-o", "json", str(EXAMPLE / "cluster.yaml"), "--config", str(config)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return {b["hyperNode"] for b in json.loads(result.stdout)["bindings"]}


def test_on_the_second_gang_spreads_to_free_uplinks_off_it_stacks(tmp_path: Path) -> None:
    assert blocks(EXAMPLE / "config.yaml") == {"a2"}
    off = tmp_path / "off.yaml"
    off.write_text((EXAMPLE / "config.yaml").read_text().replace("weight: 1", "weight: 0"))
    assert blocks(off) == {"a1"}
