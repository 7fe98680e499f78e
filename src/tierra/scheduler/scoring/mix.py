"""The gang shapes a cluster runs now: what the look-ahead keeps room for.

The cache counts, per gang shape (pods in the gang -- its ``minMember`` -- and GPUs per
pod), the GPUs its pods hold (``ClusterStore.shape_gpus``, kept as pods bind and leave). The
shapes holding most of the cluster's GPUs are the recent mix: what ran lately and long,
and so what is likely to come again. A function of the cache alone, so a session over
a snapshot scores exactly as the live scheduler did on the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TOP = 8


@dataclass(frozen=True, slots=True)
class ShapeShare:
    pods: int
    gpus_per_pod: int
    weight: float  # share of the GPUs the top shapes hold

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def top_shapes(held: Mapping[tuple[int, int], int], top: int = TOP) -> tuple[ShapeShare, ...]:
    """The ``top`` shapes holding most GPUs, weights summing to 1 (none: empty)."""
    ranked = sorted((kv for kv in held.items() if kv[1] > 0), key=lambda kv: (-kv[1], kv[0]))[:top]
    total = sum(g for _, g in ranked)
    if total <= 0:
        return ()
    return tuple(ShapeShare(p, g, n / total) for (p, g), n in ranked)
