"""The colours every picture tierra draws shares: the simulator's report and the dashboard.

Kept below both (neither the report nor the dashboard owns them), so a change of colour
is one edit and the two always read the same: a node's GPU use runs white to dark teal,
each policy has a fixed colour, and the report's table greys are the dashboard's.
"""

from __future__ import annotations

PALETTE = {
    "tierra": "#0b7a75",
    "volcano": "#d9822b",
    "kueue": "#6a51a3",
    "firstfit": "#7f7f7f",
    "spread": "#c44e52",
}
"""Fixed colours for the policies the simulator knows."""

EXTRA = ("#1f77b4", "#2ca02c", "#bcbd22", "#17becf", "#e377c2")
"""Colours for any other policy, taken in turn."""

INK = "#222222"
RULE = "#dddddd"
HEAD = "#f5f5f5"
BEST = "#e3f4f2"
UNAVAILABLE = "#b9b9b9"


def colour(policy: str, i: int) -> str:
    return PALETTE.get(policy, EXTRA[i % len(EXTRA)])


def heat_colour(x: float) -> str:
    """White (idle) through teal to dark (always busy)."""
    x = min(max(x, 0.0), 1.0)
    r = int(255 - x * (255 - 11))
    g = int(255 - x * (255 - 92))
    b = int(255 - x * (255 - 95))
    return f"#{r:02x}{g:02x}{b:02x}"
