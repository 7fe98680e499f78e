"""The dashboard's colours, taken from the simulator's report so both read the same.

The report (``tierra.sim.report``) colours a node by the share of its GPUs in use, white
to dark teal, and each policy by a fixed palette; the dashboard draws used, free and
unavailable capacity with the same scale and marks with the same palette. Served as CSS
custom properties at ``/theme.css``; every other style sheet uses only these names.
"""

from __future__ import annotations

from tierra.sim.report import PALETTE, heat_colour

COLOURS = {
    "used": heat_colour(1.0),  # the report's "always busy"
    "used-half": heat_colour(0.5),
    "free": heat_colour(0.08),  # the report's near-idle
    "accent": PALETTE["tierra"],
    "warn": PALETTE["volcano"],
    "bad": PALETTE["spread"],
    "gang": PALETTE["kueue"],
    "muted": PALETTE["firstfit"],
    "unavailable": "#b9b9b9",
    "ink": "#222222",
    "rule": "#dddddd",
    "head": "#f5f5f5",
    "best": "#e3f4f2",  # the report's best-cell background
}


def theme_css() -> str:
    props = "".join(f"--{k}:{v};" for k, v in COLOURS.items())
    return f":root{{{props}--font:system-ui,sans-serif}}\n"
