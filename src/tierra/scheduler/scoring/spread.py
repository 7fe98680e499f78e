"""Spread: prefer the emptiest domain and node (least allocated after placing).

The opposite of binpack, for services that want headroom or blast-radius isolation
rather than whole free domains. Domains and nodes score ``1 - fill`` with the same
weighted fill as binpack (0 where the request does not fit).

Arguments: ``resources`` (weight per resource name; default 1 each, ``pods`` 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tierra.api.fields import Fields
from tierra.scheduler.scoring.base import (
    View,
    fill_after,
    parse_resource_weights,
    weights_for,
)
from tierra.topology.arrays import FloatArray
from tierra.topology.index import IntArray

NAME = "spread"
ARGUMENTS = ("weight", "resources")


@dataclass(frozen=True, slots=True)
class Spread:
    resources: tuple[tuple[str, float], ...] = ()
    name: str = field(default=NAME, init=False)
    packs: bool = field(default=False, init=False)

    def _free_after(
        self, alloc: IntArray, used: IntArray, request: IntArray, view: View
    ) -> FloatArray:
        w = weights_for(view.capacity.axis.names, self.resources)
        fill = fill_after(alloc, used, request, w)
        fits = ~((used + request > alloc) & (request > 0)).any(axis=1)
        return np.asarray(np.where(fits, 1.0 - fill, 0.0), dtype=np.float64)

    def domain_scores(
        self, view: View, request: IntArray, domains: IntArray, allocated: int | None
    ) -> FloatArray:
        cap = view.capacity
        return self._free_after(cap.dom_alloc[domains], cap.dom_used[domains], request, view)

    def node_scores(
        self, view: View, request: IntArray, nodes: IntArray, region: int, allocated: int | None
    ) -> FloatArray:
        cap = view.capacity
        return self._free_after(cap.node_alloc[nodes], cap.node_used[nodes], request, view)


def parse(f: Fields) -> Spread:
    return Spread(resources=parse_resource_weights(f, NAME, ARGUMENTS))
