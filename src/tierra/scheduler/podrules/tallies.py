"""Per selector, how many matching placed pods sit on each node, kept as pods come and go.

kube-scheduler's PreFilters count once per pod the placed pods each term matches, per
topology domain (``interpodaffinity/filtering.go``: ``topologyToMatchedTermCount``;
``podtopologyspread/filtering.go``: ``TpPairToMatchNum``). A tierra gang whose pods keep
apart or spread is placed pod by pod, each evaluated against the ones before it, so a
selector is asked again after every placement: walking its matching pods each time cost
the square of the gang's size in selector matches. A ``Tally`` is that count kept up to
date instead: made by one walk the first time a selector and namespaces are asked
(``PodIndex.tally``), then moved by one test per pod added or removed, so an evaluation
reads only the nodes holding matching pods.

The count is per node, not per domain value: a topology spread counts only over the
nodes eligible for the incoming pod, which differ from pod to pod, and the domain of a
node is the ``NodeTable``'s, rebuilt with the store's index. A tally that falls empty is
dropped (a gang gone takes its selector's tally with it), so a long-running scheduler
keeps only the selectors of pods still placed.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from tierra.api.labels import LabelSelector
from tierra.api.pod import Pod

Pair = tuple[str, str]


def selector_key(sel: LabelSelector | None) -> Hashable:
    """What makes two selectors the same (equal labels and expressions)."""
    if sel is None:
        return None
    return (tuple(sorted(sel.match_labels.items())), sel.match_expressions)


def _pair(sel: LabelSelector) -> Pair | None:
    """One label pair a pod must carry to match ``sel`` (None: it requires none)."""
    return min(sel.match_labels.items()) if sel.match_labels else None


@dataclass(slots=True)
class Tally:
    """Matching placed pods per node, for one selector read in some namespaces."""

    selector: LabelSelector
    spaces: frozenset[str] | None  # None: every namespace
    nodes: dict[str, int]  # node name -> matching pods placed there

    def counts(self, pod: Pod) -> bool:
        return (self.spaces is None or pod.namespace in self.spaces) and self.selector.matches(
            pod.meta.labels
        )


@dataclass(slots=True)
class Tallies:
    """Every tally in use, indexed by a label pair its selector requires, so a pod added
    or removed is tested only against the selectors it could match."""

    by_key: dict[Hashable, Tally] = field(default_factory=dict)
    by_pair: dict[Pair | None, set[Hashable]] = field(default_factory=dict)

    def get(self, selector: LabelSelector, spaces: frozenset[str] | None) -> Tally | None:
        return self.by_key.get((selector_key(selector), spaces))

    def keep(self, tally: Tally) -> None:
        """Follow ``tally`` from now on (it counts the pods placed so far)."""
        if not tally.nodes:
            return  # an empty one is not kept: nothing would ever drop it
        key = (selector_key(tally.selector), tally.spaces)
        self.by_key[key] = tally
        self.by_pair.setdefault(_pair(tally.selector), set()).add(key)

    def _touching(self, pod: Pod) -> Iterable[Tally]:
        by, keys = self.by_pair, set(self.by_pair.get(None, ()))
        for pair in pod.meta.labels.items():
            keys |= by.get(pair, set())
        found = self.by_key
        return [t for k in keys if (t := found[k]).counts(pod)]

    def add(self, pod: Pod, node: str) -> None:
        if not self.by_key:
            return
        for t in self._touching(pod):
            t.nodes[node] = t.nodes.get(node, 0) + 1

    def remove(self, pod: Pod, node: str) -> None:
        if not self.by_key:
            return
        for t in self._touching(pod):
            left = t.nodes[node] - 1
            if left:
                t.nodes[node] = left
                continue
            del t.nodes[node]
            if not t.nodes:
                key = (selector_key(t.selector), t.spaces)
                del self.by_key[key]
                pair = _pair(t.selector)
                bucket = self.by_pair[pair]
                bucket.discard(key)
                if not bucket:
                    del self.by_pair[pair]

    def copy(self) -> Tallies:
        """Tallies of their own (a session view's ``PodIndex``)."""
        return Tallies(
            by_key={k: Tally(t.selector, t.spaces, dict(t.nodes)) for k, t in self.by_key.items()},
            by_pair={k: set(v) for k, v in self.by_pair.items()},
        )
