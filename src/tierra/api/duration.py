"""Durations as Kubernetes configs write them: seconds, or a Go duration (``1m30s``)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: object) -> float | None:
    """Seconds from a number or a Go duration (``90s``, ``1m30s``, ``500ms``); None if bad."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if not isinstance(value, str) or not value:
        return None
    total, at = 0.0, 0
    for m in _DURATION.finditer(value):
        if m.start() != at:
            return None
        total += float(m.group(1)) * _UNIT[m.group(2)]
        at = m.end()
    return total if at == len(value) else None
