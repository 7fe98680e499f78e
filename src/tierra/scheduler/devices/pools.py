"""Which devices a node can use: its resource pools, as GatherPools defines them.

After k8s.io/dynamic-resource-allocation/structured/internal/stable/pools_stable.go: a
slice belongs to a node by ``nodeName``, ``allNodes`` or ``nodeSelector``; of one pool
only the newest generation counts; a pool whose slices are not all published yet is
incomplete (no device of it is allocated, and ``All`` cannot be answered); a pool with
two devices of one name is invalid. Pools are taken in (driver, pool) order and slices
by name, so the same cluster always yields the same devices in the same order (upstream
walks a Go map here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tierra.api.resource import Device, ResourceSlice

DeviceId = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """What a slice's node selection reads of a node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)
class Candidate:
    """One device of a usable pool, with the slice it came from."""

    id: DeviceId
    device: Device
    slice: ResourceSlice


@dataclass(frozen=True, slots=True)
class Pool:
    driver: str
    name: str
    candidates: tuple[Candidate, ...] = ()
    incomplete: bool = False
    invalid: str = ""  # why the pool is invalid, empty when it is valid


@dataclass(frozen=True, slots=True)
class NodePools:
    pools: tuple[Pool, ...]
    skipped: tuple[str, ...] = ()  # what tierra left out, and why (for refusals)


def slice_targets(s: ResourceSlice, node: NodeInfo) -> bool:
    if s.node_name:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        return any(t.matches(node.name, node.labels) for t in s.node_selector)
    return False


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """Every slice of the cluster, by the node it names, so a node's pools are gathered
    from its own slices and the few that select nodes, not from all of them."""

    local: Mapping[str, tuple[ResourceSlice, ...]]
    anywhere: tuple[ResourceSlice, ...]  # allNodes or a node selector
    unsupported: tuple[ResourceSlice, ...]
    by_pool: Mapping[tuple[str, str], tuple[ResourceSlice, ...]]

    @classmethod
    def of(cls, slices: Sequence[ResourceSlice]) -> SliceIndex:
        local: dict[str, list[ResourceSlice]] = {}
        anywhere, unsupported = [], []
        by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
        for s in slices:
            by_pool.setdefault((s.driver, s.pool), []).append(s)
            if s.unsupported:
                unsupported.append(s)
            elif s.node_name:
                local.setdefault(s.node_name, []).append(s)
            elif s.all_nodes or s.node_selector is not None:
                anywhere.append(s)
        return cls(
            {k: tuple(v) for k, v in local.items()},
            tuple(anywhere),
            tuple(unsupported),
            {k: tuple(v) for k, v in by_pool.items()},
        )


def gather_pools(
    slices: Sequence[ResourceSlice] | SliceIndex,
    node: NodeInfo,
    memo: dict[tuple[object, ...], Pool | None] | None = None,
) -> NodePools:
    """The pools of ``node``; ``slices`` is every slice of the cluster (for generations).
    ``memo`` keeps each pool made from the same slices (a shared pool, seen by many
    nodes): one ``Pool`` and one set of candidates however many nodes see it."""
    index = slices if isinstance(slices, SliceIndex) else SliceIndex.of(slices)
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    skipped = [
        f"ResourceSlice/{s.meta.name} ({', '.join(s.unsupported)})" for s in index.unsupported
    ]
    for s in (*index.local.get(node.name, ()), *index.anywhere):
        if not slice_targets(s, node):
            continue
        key = (s.driver, s.pool)
        have = by_pool.get(key)
        if have is None or s.generation > have[0].generation:
            by_pool[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)
    pools = []
    for key in sorted(by_pool):
        mine = by_pool[key]
        if memo is None:
            pool = _pool(key, mine, index.by_pool.get(key, ()))
        else:
            at = (key, *map(id, mine))
            if at not in memo:
                memo[at] = _pool(key, mine, index.by_pool.get(key, ()))
            pool = memo[at]
        if pool is not None:
            pools.append(pool)
    return NodePools(tuple(pools), tuple(skipped))


def _pool(
    key: tuple[str, str], mine: list[ResourceSlice], every: Sequence[ResourceSlice]
) -> Pool | None:
    generation, wanted = mine[0].generation, mine[0].slice_count
    if len(mine) != wanted:
        same = every  # every slice of this pool, on any node
        if any(s.generation > generation for s in same):
            return None  # obsolete: a newer generation exists elsewhere
        if sum(1 for s in same if s.generation == generation) != wanted:
            return Pool(key[0], key[1], incomplete=True)
    ordered = sorted(mine, key=lambda s: s.meta.name)
    duplicate = _duplicate(d.name for s in ordered for d in s.devices)
    if duplicate:
        return Pool(key[0], key[1], invalid=f"duplicate device name {duplicate}")
    candidates = tuple(
        Candidate((key[0], key[1], d.name), d, s) for s in ordered for d in s.devices
    )
    return Pool(key[0], key[1], candidates)


def _duplicate(names: Iterable[str]) -> str:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            return n
        seen.add(n)
    return ""
