"""The scheduler's decisions are byte-identical to the golden files of ``hack/golden.py``.

Written at commit 09c6372, before the scheduler's reshaping (issue 19), and kept through
it: ``tierra schedule -o json`` on every schedulable snapshot under ``examples/`` and
``tests/fixtures/`` (with and without the example config), which inputs exit with what,
and the simulator on three presets with fixed seeds (preemption included).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden", ROOT / "hack" / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("golden", module)
    spec.loader.exec_module(module)
    return module


GOLDEN = _golden()
OUTPUTS = list(GOLDEN.outputs())  # once: the simulations take seconds


def test_every_golden_file_is_produced() -> None:
    names = {name for name, _ in OUTPUTS}
    kept = {p.name for p in GOLDEN.GOLDEN.iterdir()}
    assert names == kept
    assert len([n for n in names if n.startswith("schedule-")]) >= 30


@pytest.mark.parametrize("name_content", OUTPUTS, ids=lambda nc: nc[0])
def test_same_bytes_as_golden(name_content: tuple[str, str]) -> None:
    name, content = name_content
    assert content == (GOLDEN.GOLDEN / name).read_text()
