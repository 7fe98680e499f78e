"""The dashboard and the simulator's report draw with one palette (issue 19)."""

from __future__ import annotations

from tierra import palette
from tierra.sim import report
from tierra.web.theme import COLOURS, theme_css


def test_the_report_and_the_dashboard_read_one_palette() -> None:
    assert report.colour is palette.colour and report.heat_colour is palette.heat_colour
    assert COLOURS["used"] == palette.heat_colour(1.0) == "#0b5c5f"
    assert COLOURS["free"] == palette.heat_colour(0.08)
    assert COLOURS["accent"] == palette.PALETTE["tierra"]
    assert f"--best:{palette.BEST};" in theme_css()


def test_other_policies_take_the_extra_colours_in_turn() -> None:
    assert palette.colour("tierra", 3) == palette.PALETTE["tierra"]
    assert palette.colour("mine", 0) == palette.EXTRA[0]
    assert palette.colour("mine", len(palette.EXTRA) + 1) == palette.EXTRA[1]
