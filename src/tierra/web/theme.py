"""The dashboard's colours, from the palette it shares with the simulator's report.

The palette (``tierra.palette``, below both) colours a node by the share of its GPUs in use, white
to dark teal, and each policy by a fixed palette; the dashboard draws used, free and
unavailable capacity with the same scale and marks with the same palette. Served as CSS
custom properties at ``/theme.css``; every other style sheet uses only these names.
"""

from __future__ import annotations

from tierra.palette import BEST, HEAD, INK, PALETTE, RULE, UNAVAILABLE, heat_colour

COLOURS = {
    "used": heat_colour(1.0),  # the report's "always busy"
    "used-half": heat_colour(0.5),
    "free": heat_colour(0.08),  # the report's near-idle
    "accent": PALETTE["tierra"],
    "warn": PALETTE["volcano"],
    "bad": PALETTE["spread"],
    "gang": PALETTE["kueue"],
    "muted": PALETTE["firstfit"],
    "unavailable": UNAVAILABLE,
    "ink": INK,
    "rule": RULE,
    "head": HEAD,
    "best": BEST,  # the report's best-cell background
}


def theme_css() -> str:
    props = "".join(f"--{k}:{v};" for k, v in COLOURS.items())
    return f":root{{{props}--font:system-ui,sans-serif}}\n"
