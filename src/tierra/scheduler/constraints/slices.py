"""Inner slice layers: Kueue's multi-layer slices below the outer one.

``podset-slice-required-topology-constraints`` lists up to three layers, outer first.
The outer layer cuts the PodSet into sub-groups, each required in one domain of its
level (``kueue_levels``); each inner layer asks that, inside, pods come in groups of its
size within one domain of its level -- with slots filled in rank order, that is every
domain of the inner level holding a multiple of the inner size of the PodSet's pods
(Kueue's ``buildSliceSizeAtLevel`` distributes in multiples of the inner size at every
level down to it). ``reserve`` checks it once the gang is placed and refuses otherwise,
so the next candidate domain is tried and the reason names the layer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.api.kueue_pod_group import podset_of
from tierra.api.pod import Pod
from tierra.scheduler.constraints.kueue_levels import Nest
from tierra.scheduler.constraints.protocol import Constraint, Cycle, Refusal

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore
    from tierra.topology.index import TopologyIndex


def _at(ix: TopologyIndex, h: int, layer: Nest) -> bool:
    if layer.tier is not None:
        return int(ix.tier[h]) == layer.tier
    return ix.hypernodes[h].tier_name == layer.tier_name


@dataclass(frozen=True, slots=True)
class InnerSlices(Constraint):
    """Refuses a placement whose inner-layer domains hold a partial group."""

    name = "kueue-inner-slices"

    def alone_alike(self, cycle: Cycle) -> bool:
        return True  # reserves for Kueue's slices only: a lone pod has none

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        gang = cycle.gang
        shape = gang.kueue if gang is not None else None
        if shape is None or not shape.inner or gang is None:
            return None
        store, ix = cycle.store, cycle.store.index
        of = (lambda _: "gang") if "gang" in shape.inner else podset_of
        on: dict[str, list[int]] = {}
        for p in gang.running:
            if p.key in store.node_of:
                on.setdefault(of(p), []).append(store.node_of[p.key])
        for p, n in placed:
            on.setdefault(of(p), []).append(n)
        for ps, layers in sorted(shape.inner.items()):
            for layer in layers:
                counts: Counter[int] = Counter()
                for n in on.get(ps, ()):
                    for d in ix.domains_of(n):
                        h = int(d)
                        if h != ix.root and _at(ix, h, layer):
                            counts[h] += 1
                bad = sorted(h for h, c in counts.items() if c % layer.size)
                if bad:
                    values = (
                        ("podset", ps),
                        ("level", layer.text),
                        ("size", layer.size),
                        ("domain", ix.names[bad[0]]),
                        ("pods", counts[bad[0]]),
                    )
                    return Refusal(self, "inner slice", len(bad), values)
        return None

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        v = refusal.value
        ps = v("podset")
        who = "the gang" if ps == "gang" else f"PodSet {ps}"
        return (
            f"{who}: inner slice layer at {v('level')} needs groups of {v('size')} pods, "
            f"but {v('domain')} would hold {v('pods')}"
        )
