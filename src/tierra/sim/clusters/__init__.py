"""Built-in clusters: one module per preset, listed by hand in ``PRESETS``.

Every preset builds Nodes and tierra HyperNodes (with ``spec.link`` from the cost model)
for any size from 64 to 100,000 nodes, and ``write_cluster`` writes them as snapshot
files, so ``tierra tree``, ``validate``, ``schedule`` and ``simulate`` all read the
same thing. ``load_cluster`` reads a user's own snapshot as a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tierra.api.hypernode import HyperNode, encode_hypernode
from tierra.api.manifest import dump_yaml
from tierra.api.node import Node, encode_node
from tierra.api.snapshot import Snapshot, load_snapshot
from tierra.errors import ConfigError, InputError, errors_only
from tierra.sim.clusters import cloud, fattree, mixed, nvl72, superpod
from tierra.sim.clusters._build import GPU, LinkFor
from tierra.sim.cost import CostModel, default_cost_model
from tierra.topology.index import TopologyIndex

if TYPE_CHECKING:
    from tierra.sim.devices import ClusterDevices

MIN_NODES = 64
MAX_NODES = 100_000
DEFAULT_PRESET = fattree.NAME
DEFAULT_NODES = 128  # x 8 GPUs = the 1,024-GPU default


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    build: Callable[[int, LinkFor], tuple[list[Node], list[HyperNode]]]


PRESETS: dict[str, Preset] = {
    m.NAME: Preset(m.NAME, m.DESCRIPTION, m.build) for m in (superpod, nvl72, fattree, mixed, cloud)
}


@dataclass(frozen=True, kw_only=True)
class SimCluster:
    """Nodes and HyperNodes of one simulated cluster (immutable; the index is built once)."""

    name: str
    description: str
    nodes: tuple[Node, ...]
    hypernodes: tuple[HyperNode, ...]
    extra: Snapshot = field(default_factory=Snapshot)  # a loaded snapshot's pods, queues
    devices: ClusterDevices | None = None  # GPUs and NICs as DRA slices (``sim/devices.py``)

    @cached_property
    def index(self) -> TopologyIndex:
        return TopologyIndex.build(self.nodes, self.hypernodes)

    @property
    def gpus(self) -> int:
        return sum(n.allocatable.get(GPU, 0) for n in self.nodes) // 1000

    def snapshot(self) -> Snapshot:
        return Snapshot(
            nodes=self.nodes,
            hypernodes=self.hypernodes,
            pods=self.extra.pods,
            podgroups=self.extra.podgroups,
            queues=self.extra.queues,
        )

    def manifests(self) -> list[dict[str, Any]]:
        return [encode_node(n) for n in self.nodes] + [encode_hypernode(h) for h in self.hypernodes]


def build_cluster(preset: str, nodes: int, cost: CostModel | None = None) -> SimCluster:
    """A preset at ``nodes`` nodes; unknown names and sizes out of range are ``ConfigError``."""
    found = PRESETS.get(preset)
    if found is None:
        raise ConfigError(
            f"unknown cluster preset {preset!r}; choose one of: {', '.join(sorted(PRESETS))}"
            " (or give the path of a snapshot file or directory)"
        )
    if not MIN_NODES <= nodes <= MAX_NODES:
        raise ConfigError(
            f"--nodes must be between {MIN_NODES:,} and {MAX_NODES:,} for a built-in cluster;"
            f" got {nodes:,}"
        )
    model = cost or default_cost_model()
    node_list, hypernodes = found.build(nodes, model.link)
    return SimCluster(
        name=preset,
        description=found.description,
        nodes=tuple(node_list),
        hypernodes=tuple(hypernodes),
    )


def with_devices(cluster: SimCluster, layout: str = "aligned") -> SimCluster:
    """``cluster`` with its GPUs and NICs published as DRA slices (``sim/devices.py``)."""
    from tierra.sim.devices import ClusterDevices  # noqa: PLC0415 - devices import clusters

    return replace(cluster, devices=ClusterDevices.of(cluster.nodes, layout))


def write_cluster(cluster: SimCluster, directory: str | Path) -> list[Path]:
    """``nodes.yaml`` and ``hypernodes.yaml`` in ``directory`` (created if missing)."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    files = {
        out / "nodes.yaml": dump_yaml(encode_node(n) for n in cluster.nodes),
        out / "hypernodes.yaml": dump_yaml(encode_hypernode(h) for h in cluster.hypernodes),
    }
    for path, text in files.items():
        tmp = path.with_suffix(".yaml.tmp")
        tmp.write_text(text, "utf-8")
        tmp.replace(path)  # nothing half-written
    return list(files)


def load_cluster(paths: Sequence[str | Path]) -> SimCluster:
    """A user's snapshot (files, or folders of them: ``load_snapshot``) as a cluster."""
    snap = load_snapshot(paths)
    errors = errors_only(snap.problems)
    if errors:
        raise InputError(errors)
    if not snap.nodes:
        raise InputError(f"{', '.join(map(str, paths))}: no Node objects in the snapshot")
    if not any(n.allocatable.get(GPU, 0) >= 1000 for n in snap.nodes):  # every job wants GPUs
        raise InputError(f"{', '.join(map(str, paths))}: no node has a whole {GPU}")
    return SimCluster(
        name=", ".join(str(p) for p in paths),
        description=f"snapshot: {len(snap.nodes):,} nodes, {len(snap.hypernodes):,} HyperNodes",
        nodes=snap.nodes,
        hypernodes=snap.hypernodes,
        extra=Snapshot(pods=snap.pods, podgroups=snap.podgroups, queues=snap.queues),
    )


__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_PRESET",
    "MAX_NODES",
    "MIN_NODES",
    "PRESETS",
    "Preset",
    "SimCluster",
    "build_cluster",
    "load_cluster",
    "with_devices",
    "write_cluster",
]
