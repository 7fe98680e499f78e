"""Scoring policies, listed here by hand: name -> the function parsing its arguments.

Adding a policy is one module (``NAME``, a frozen dataclass implementing ``Policy``, a
``parse(fields)``) and one line below; nothing registers itself on import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tierra.api.fields import Fields
from tierra.scheduler.scoring import binpack, lookahead, spread, topology
from tierra.scheduler.scoring.base import Policy, View

REGISTRY: Mapping[str, Callable[[Fields], Policy]] = {
    binpack.NAME: binpack.parse,
    spread.NAME: spread.parse,
    topology.NAME: topology.parse,
    lookahead.NAME: lookahead.parse,
}

__all__ = ["REGISTRY", "Policy", "View"]
