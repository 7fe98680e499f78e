"""The store's topology: nodes and HyperNodes, and the index and layouts built over them.

Only a change that moves topology (a node added or removed, new labels or allocatable,
HyperNodes changed) rebuilds the index, the capacity ledger, health, the per-tier
layouts and the node filter (and with them the usage ledgers, node numbers having
changed); inside ``with store.batch():`` that rebuild happens once, at the end (an
informer's first list). A node turning NotReady or cordoned updates its health counts
in place.

Nodes that do not report ``pods`` in allocatable get the kubelet default (110), so a
hand-written snapshot does not make every node full.

A HyperNode arrives with the problems its decoding found (``upsert_hypernode(h,
problems)``); one with an error makes its tree unusable, with the reason, exactly as the
same object in a snapshot file does for ``tierra validate`` and ``tierra schedule``.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Self

import numpy as np

from tierra.api.hypernode import TIERRA_GROUP, HyperNode, HyperNodeKey
from tierra.api.node import Node
from tierra.api.pod import PODS, Pod
from tierra.bulk import building
from tierra.errors import Problem
from tierra.scheduler.constraints.eligibility import NodeFilter
from tierra.scheduler.scoring.base import View
from tierra.scheduler.scoring.links import LinkCosts, LinkTable
from tierra.scheduler.scoring.mix import top_shapes
from tierra.scheduler.state.layout import Layouts
from tierra.scheduler.state.view import Feedable, fed

if TYPE_CHECKING:
    from tierra.scheduler.state.view import Kept
from tierra.topology.capacity import Capacity
from tierra.topology.health import Health
from tierra.topology.index import IntArray, TopologyIndex

DEFAULT_PODS = 110_000  # kubelet's default max pods, in milli-units


def _with_pods(node: Node) -> Node:
    if PODS in node.allocatable:
        return node
    return replace(node, allocatable={**node.allocatable, PODS: DEFAULT_PODS})


class Topology(Feedable):
    """The topology part of ``ClusterStore`` (see the module docstring)."""

    hypernodes: dict[HyperNodeKey, HyperNode]  # by (group, name): two name spaces
    input_problems: tuple[Problem, ...]
    hypernode_problems: dict[HyperNodeKey, tuple[Problem, ...]]  # its decoding's
    index: TopologyIndex
    capacity: Capacity  # the ledger: used room per node and per domain
    health: Health
    layouts: Layouts
    filter: NodeFilter
    view: View  # what scoring policies read (``scoring_view`` adds the session's part)
    generation: int  # bumped whenever the index is rebuilt
    _links: dict[LinkTable, LinkCosts]
    _healthy: tuple[int, IntArray | None]
    _batching: int
    _stale: bool  # topology changed inside a batch: rebuild when it ends
    _staged: dict[str, Node] | None  # the nodes from then on, until it does
    _nodes: list[Node]

    if TYPE_CHECKING:  # held by the other parts of the store
        pods: dict[str, Pod]
        freed_at: int
        shape_gpus: Counter[tuple[int, int]]
        _replays: list[Kept]

        def _reset_usage(self) -> None: ...
        def _hold_all(self, pods: Iterable[tuple[str, Pod]]) -> None: ...
        def _clock_rebuilt(self, domains: int) -> None: ...
        def _freed(self) -> None: ...
        def _replay(self) -> None: ...

    def _init_topology(self, hypernodes: Sequence[HyperNode], problems: Iterable[Problem]) -> None:
        self.hypernodes = {h.key: h for h in hypernodes}
        self.input_problems = tuple(problems)
        self.hypernode_problems = {}
        self.generation = 0
        self._batching = 0
        self._healthy = (-1, None)
        self._stale = False
        self._staged = None
        self._nodes = []

    def _fork_topology(self) -> None:
        """Own copies of what a view shares and a feed may change in place
        (``view.fork``): the ledger, health and the node filter over them."""
        self.hypernodes = dict(self.hypernodes)
        self.hypernode_problems = dict(self.hypernode_problems)
        self._links = dict(self._links)
        cap = copy.copy(self.capacity)
        cap.node_used = cap.node_used.copy()
        cap.dom_used = cap.dom_used.copy()
        self.capacity = cap
        health = copy.copy(self.health)
        health.node_flags = health.node_flags.copy()
        health.counts = health.counts.copy()
        health.unhealthy_nodes = health.unhealthy_nodes.copy()
        self.health = health
        self._nodes = list(self._nodes)
        self.filter = self.filter.forked(self._nodes, health)
        self.view = replace(self.view, capacity=cap)

    # -- the index and the ledgers over it --------------------------------------------

    def _build(self, by_name: dict[str, Node]) -> None:
        with building():
            self._build_index(by_name)

    def _build_index(self, by_name: dict[str, Node]) -> None:
        nodes = list(by_name.values())
        hns = list(self.hypernodes.values())
        self.index = TopologyIndex.build(
            nodes, hns, self.input_problems, keyed=self.hypernode_problems
        )
        ix = self.index
        self._staged = None
        self._nodes = sorted(nodes, key=lambda n: ix.node_ix[n.name])
        self.capacity = Capacity(ix, self._nodes)
        self.health = Health(ix, self._nodes)
        self.layouts = Layouts(ix)
        self.filter = NodeFilter(self._nodes, self.health)
        self.view = View(ix, self.capacity, self.layouts)
        self._links = {}
        self.generation += 1
        self._clock_rebuilt(len(self.capacity.dom_alloc))
        self._reset_usage()
        self._hold_all(self.pods.items())

    @property
    def nodes(self) -> list[Node]:
        """Every node, in index order (in a batch after a topology change: as staged)."""
        return self._nodes if self._staged is None else list(self._staged.values())

    def _nodes_by_name(self) -> dict[str, Node]:
        """The nodes as the next rebuild will index them; the store's own dict to change
        while staged, so an informer's list of N nodes costs N, not N squared."""
        if self._staged is not None:
            return self._staged
        return {n.name: n for n in self._nodes}

    def _rebuild(self, by_name: dict[str, Node] | None = None) -> None:
        """Rebuild the index now, or once at the end of the current ``batch``."""
        if by_name is not None:
            self._staged = by_name  # the index is stale until rebuilt
        if self._batching:
            self._stale = True
            return
        self._build(self._nodes_by_name())

    @contextmanager
    def batch(self) -> Iterator[Self]:
        """Apply many updates with at most one index rebuild, when the block ends.

        Inside the block the index (and so node numbers, ``nodes`` and the ledgers) may
        be stale; run no session there."""
        self._batching += 1
        try:
            yield self
        finally:
            self._batching -= 1
            if not self._batching and self._stale:
                self._stale = False
                self._build(self._nodes_by_name())
                if self._replays:  # a session's decisions kept meanwhile (``view.py``)
                    with self.lock:
                        self._replay()

    def links(self, table: LinkTable = ()) -> LinkCosts:
        """Bandwidth and weight of every domain and node (``links.py``), once per index."""
        found = self._links.get(table)
        if found is None:
            found = self._links[table] = LinkCosts.build(self.index, self.nodes, table)
        return found

    def scoring_view(self, table: LinkTable = ()) -> View:
        """What a session scores with: the link rates and the shape mix (``mix.py``) as they
        stand when it starts. Fixed for the session, so the flat path's kept scores stay
        valid from one lone pod to the next (``flat_state.py``); the gangs it places count
        in the next session's mix."""
        return replace(self.view, links=self.links(table), mix=top_shapes(self.shape_gpus))

    def healthy_total(self) -> IntArray:
        """Allocatable summed over nodes that may take pods (Ready, not cordoned).

        Kept until something that may change it happens (``freed_at``: a node or the
        index changed): every session's queue shares start from it."""
        at, total = self._healthy
        if at != self.freed_at or total is None:
            alloc = self.capacity.node_alloc[self.filter.base]
            total = np.asarray(alloc.sum(axis=0), dtype=np.int64)
            self._healthy = (self.freed_at, total)
        return total

    # -- nodes ------------------------------------------------------------------------

    def node(self, name: str) -> Node | None:
        i = self.index.node_ix.get(name)
        return None if i is None or self._stale else self._nodes[i]

    @fed
    def upsert_node(self, node: Node) -> None:
        """Readiness, cordon or taint changes update health in place; a new node, or new
        labels or allocatable, rebuild the index (HyperNode members may change)."""
        node = _with_pods(node)
        i = self.index.node_ix.get(node.name)
        if self._stale or i is None:
            by_name = self._nodes_by_name()
            if by_name.get(node.name) == node:
                return
            by_name[node.name] = node
            self._rebuild(by_name)
            return
        old = self._nodes[i]
        if old == node:
            return
        if old.labels != node.labels or old.allocatable != node.allocatable:
            self._rebuild({**self._nodes_by_name(), node.name: node})
            return
        self._nodes[i] = node
        self.health.update(node)
        self.filter.invalidate()
        self._freed()

    @fed
    def remove_node(self, name: str) -> None:
        by_name = self._nodes_by_name()
        if by_name.pop(name, None) is not None:
            self._rebuild(by_name)

    # -- HyperNodes -------------------------------------------------------------------

    @fed
    def upsert_hypernode(self, hypernode: HyperNode, problems: Iterable[Problem] = ()) -> None:
        """Add or replace a HyperNode with the problems decoding it found (an error makes
        its tree unusable until a version without one arrives)."""
        key, found = hypernode.key, tuple(problems)
        if self.hypernodes.get(key) == hypernode and self.hypernode_problems.get(key, ()) == found:
            return
        self.hypernodes[key] = hypernode
        if found:
            self.hypernode_problems[key] = found
        else:
            self.hypernode_problems.pop(key, None)
        self._rebuild()

    @fed
    def remove_hypernode(self, name: str, group: str = TIERRA_GROUP) -> None:
        """Remove ``name`` of ``group`` (the other group's HyperNode of that name stays)."""
        key = HyperNodeKey(group, name)
        self.hypernode_problems.pop(key, None)
        if self.hypernodes.pop(key, None) is not None:
            self._rebuild()

    @fed
    def set_hypernodes(self, hypernodes: Sequence[HyperNode]) -> None:
        """Replace every HyperNode at once (one rebuild); problems of the ones that are
        gone go with them."""
        new = {h.key: h for h in hypernodes}
        if new != self.hypernodes:
            self.hypernodes = new
            self.hypernode_problems = {k: v for k, v in self.hypernode_problems.items() if k in new}
            self._rebuild()
