"""Explain is off the placement path: placing a gang that is placed runs nothing of
``scheduler/explain/`` (a failed try on the way leaves data, ``misses.py``, not words);
a gang that waits is worded once, after its steps.

Run over every snapshot the golden files cover (``hack/golden.py``), with and without
the example config, watching every Python call made inside ``_Session.place``. The one
sentence a placed gang may need is its victims' reason (``words.eviction_reason``, part
of the decision it commits), so calls under it are left out.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest

from tierra.scheduler.gang import Gang
from tierra.scheduler.queueing.queues import QueueBook
from tierra.scheduler.session import _Session
from tierra.scheduler.status import Status

ROOT = Path(__file__).resolve().parents[2]
EXPLAIN = "/scheduler/explain/"
ALLOWED = "eviction_reason"  # the victims' reason: the committed decision's own words


def _golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("golden", ROOT / "hack" / "golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("golden", module)
    spec.loader.exec_module(module)
    return module


class ExplainCalls:
    """A profile hook: the explain functions entered, outside ``ALLOWED``'s calls."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.inside = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_name == ALLOWED:
            self.inside += 1
        elif event == "return" and code.co_name == ALLOWED:
            self.inside -= 1
        elif event == "call" and not self.inside and EXPLAIN in code.co_filename:
            where = code.co_filename.split(EXPLAIN, 1)[1]
            self.seen[f"{where}:{code.co_name}"] += 1


def test_no_explain_call_places_a_gang_and_a_waiting_one_is_worded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    golden = _golden()
    placed: Counter[str] = Counter()
    waiting: Counter[str] = Counter()
    counts = {"placed": 0, "waiting": 0}
    real = _Session.place

    def place(self: _Session, gang: Gang, book: QueueBook, trace: Any) -> Status:
        calls = ExplainCalls()
        sys.setprofile(calls)
        try:
            status = real(self, gang, book, trace)
        finally:
            sys.setprofile(None)
        kind = "placed" if status.ok else "waiting"
        counts[kind] += 1
        (placed if status.ok else waiting).update(calls.seen)
        return status

    monkeypatch.setattr(_Session, "place", place)
    for path in golden.inputs(golden.indexed()):
        for extra in ([], ["--config", str(golden.CONFIG)]):
            golden._run(["schedule", "-o", "json", str(path), *extra])
    assert counts["placed"] >= 15 and counts["waiting"] >= 15, counts
    assert placed == Counter(), placed  # nothing of explain/ for a gang that is placed
    assert waiting["misses.py:worded"] >= counts["waiting"] // 2  # the hook sees explain
