"""DRA ResourceSlices -> per-node device domains, and NVLink cliques -> HyperNodes.

A ResourceSlice (``resource.k8s.io`` v1, v1beta2 or v1beta1, where attributes sit
under ``basic``) lists a driver's devices on one node with typed attributes. Three kinds
of attribute describe where a device sits:

* the PCIe root complex, ``resource.kubernetes.io/pcieRoot`` (``pci0000:44``; a list
  for a device spanning several, as the CPU driver publishes): devices sharing a root
  form a ``pcie-root`` domain;
* the NUMA node, ``resource.kubernetes.io/numaNode`` (KEP-6072; also read under the
  driver's own ``numaNode``/``numa``): a ``numa`` domain;
* a multi-node NVLink clique (``cliqueID``/``clique`` under the driver, or the GFD
  label name ``nvidia.com/gpu.clique``): nodes sharing a clique form a tier-1
  HyperNode of medium ``nvlink``, the same domain the ``nvidia-clique`` label preset
  reads from node labels.

An unqualified attribute name belongs to the slice's driver (``productName`` of
``gpu.nvidia.com`` is ``gpu.nvidia.com/productName``), as DRA defines. Which attributes
mean what is the node's inside's rule (``tierra.topology.inside``), the one the
allocator and ``tierra tree`` read too. The source takes
typed ``ResourceSlice`` objects, so the Kubernetes adapter can feed it live slices;
``decode_resource_slice`` reads them from manifests. ComputeDomain bookkeeping devices
(``compute-domain.nvidia.com`` channels and daemons) are not hardware and are skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.hypernode import HyperNode, LinkSpec
from tierra.api.meta import object_ref
from tierra.api.natural import natural_key
from tierra.discovery import naming
from tierra.discovery.nodetopology import Device, Domain, NodeTopology
from tierra.discovery.result import SOURCE_NAME, Discovery, hypernode, note, sorted_hypernodes
from tierra.errors import Origin, Problem
from tierra.topology.inside import SKIPPED_DRIVERS, from_devices

SOURCE = "dra"
GROUP = "resource.k8s.io"
_VALUE_KEYS = ("string", "int", "bool", "version", "strings", "ints")

AttrValue = str | int | bool | tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DraDevice:
    name: str
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)  # fully qualified names


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceSlice:
    name: str
    driver: str
    node_name: str | None
    pool: str = ""
    devices: tuple[DraDevice, ...] = ()
    origin: Origin | None = field(default=None, compare=False)


def _qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _scalar_ok(kind: str, v: object) -> bool:
    if kind in ("string", "version"):
        return isinstance(v, str)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    return kind == "bool" and isinstance(v, bool)


def _list_ok(kind: str, v: object) -> bool:
    item = {"strings": str, "ints": int}.get(kind)
    return item is not None and isinstance(v, list) and all(isinstance(x, item) for x in v)


def decode_resource_slice(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> ResourceSlice:
    """A ResourceSlice manifest as a typed object; problems (with field paths) go to ``sink``."""
    f = Fields(raw, "", Report(origin, object_ref(raw, "ResourceSlice"), sink))
    name = f.obj("metadata").string("name") or "?"
    spec = f.obj("spec", required=True)
    driver = spec.string("driver", required=True)
    node_name = spec.opt_str("nodeName")
    devices: list[DraDevice] = []
    for d in spec.objects("devices"):
        holder = d.obj("basic") if d.has("basic") else d  # v1beta1 nests under "basic"
        attrs: dict[str, AttrValue] = {}
        raw_attrs = holder.raw("attributes")
        if raw_attrs is not None and not isinstance(raw_attrs, Mapping):
            holder.problem("attributes", "expected an object")
            raw_attrs = {}
        for key, value in (raw_attrs or {}).items():
            path = f"attributes.{key}"
            if not isinstance(value, Mapping) or len(value) != 1:
                holder.problem(path, f"expected exactly one of {', '.join(_VALUE_KEYS)}")
                continue
            raw_kind, v = next(iter(value.items()))
            kind = str(raw_kind)
            kind = {"stringValue": "string", "intValue": "int", "boolValue": "bool"}.get(kind, kind)
            value_ok = _scalar_ok(kind, v)
            if value_ok:
                attrs[_qualify(str(key), driver)] = v
            elif _list_ok(kind, v):
                attrs[_qualify(str(key), driver)] = tuple(v)
            else:
                holder.problem(path, f"{kind}: unexpected value {v!r}")
        devices.append(DraDevice(d.string("name", required=True), attrs))
    pool = spec.obj("pool").string("name")
    return ResourceSlice(
        name=name,
        driver=driver,
        node_name=node_name,
        pool=pool,
        devices=tuple(devices),
        origin=origin,
    )


def slices_from_documents(
    documents: Iterable[tuple[Origin, Mapping[str, Any]]], sink: list[Problem]
) -> list[ResourceSlice]:
    out = []
    for origin, raw in documents:
        api = str(raw.get("apiVersion", ""))
        if raw.get("kind") == "ResourceSlice" and api.split("/", maxsplit=1)[0] == GROUP:
            out.append(decode_resource_slice(raw, origin, sink))
    return out


def discover_dra(
    slices: Sequence[ResourceSlice],
    *,
    owner: str = SOURCE,
    prefix: str = "dra-clique",
    skip_drivers: Sequence[str] = SKIPPED_DRIVERS,
) -> Discovery:
    """Per-node topologies from device attributes, and clique HyperNodes across nodes."""
    per_node: dict[str, list[tuple[ResourceSlice, DraDevice]]] = defaultdict(list)
    notes: list[Problem] = []
    pooled = 0
    for s in sorted(slices, key=lambda s: (s.node_name or "", s.driver, s.name)):
        if s.driver in skip_drivers:
            continue
        if not s.node_name:
            pooled += 1
            continue
        for d in s.devices:
            per_node[s.node_name].append((s, d))
    if pooled:
        notes.append(note(f"{pooled} ResourceSlice(s) are not tied to one node; not used"))
    topologies: list[NodeTopology] = []
    cliques: dict[str, set[str]] = defaultdict(set)
    for node, entries in sorted(per_node.items()):
        topologies.append(_node_topology(node, entries, cliques))
    proposed = {c: naming.join(prefix, c) for c in cliques}
    names = naming.unique_names(proposed)
    hns: list[HyperNode] = [
        hypernode(
            names[c],
            tier=1,
            nodes=nodes,
            owner=owner,
            topology=naming.label_value(prefix),
            tier_name="nvlink-clique",
            link=LinkSpec(medium="nvlink"),
            annotations={SOURCE_NAME: c},
        )
        for c, nodes in sorted(cliques.items())
    ]
    return Discovery(
        source=SOURCE,
        owner=owner,
        hypernodes=sorted_hypernodes(hns),
        node_topologies=tuple(topologies),
        notes=tuple(notes),
        summary={
            "slices": len(slices),
            "nodes": len(topologies),
            "devices": sum(len(t.devices) for t in topologies),
            "cliques": len(cliques),
        },
    )


def _node_topology(
    node: str, entries: list[tuple[ResourceSlice, DraDevice]], cliques: dict[str, set[str]]
) -> NodeTopology:
    """One node's devices and their PCIe-root and NUMA domains, read by the node's inside
    (``tierra.topology.inside``, the rule every reader shares), as the annotation writes
    them: domains of two devices or more, a set of devices once; its clique into
    ``cliques`` (clique -> nodes)."""
    entries.sort(key=lambda e: (e[0].driver, natural_key(e[1].name)))
    inside = from_devices(node, ((s.driver, s.pool, d.name, d.attributes) for s, d in entries))
    named = {(s.driver, s.pool, d.name): f"{s.driver}/{d.name}" for s, d in entries}
    devices: list[Device] = []
    for s, d in entries:
        if s.driver in SKIPPED_DRIVERS:
            continue
        where = inside.where((s.driver, s.pool, d.name))
        kind_attr = d.attributes.get(f"{s.driver}/type")
        uuid = d.attributes.get(f"{s.driver}/uuid")
        numa = [n.removeprefix("numa") for n in where.get("numa", ())]
        devices.append(
            Device(
                name=named[(s.driver, s.pool, d.name)],
                kind=str(kind_attr) if isinstance(kind_attr, str) else s.driver.split(".")[0],
                alias=uuid if isinstance(uuid, str) else None,
                numa=int(numa[0]) if len(numa) == 1 and numa[0].isdigit() else None,
                pcie_root=",".join(where.get("pcie-root", ())) or None,
            )
        )
    if inside.clique is not None:
        cliques[inside.clique].add(node)
    domains: list[Domain] = []
    seen: set[frozenset[str]] = set()
    for dom in inside.domains:
        members = [named[k] for k in dom.devices if k in named]
        if len(members) < 2 or frozenset(members) in seen:
            continue
        seen.add(frozenset(members))
        label = dom.name if dom.level == "numa" else naming.clean(f"{dom.level}-{dom.name}")
        domains.append(Domain(kind=dom.level, name=label, devices=tuple(members)))
    return NodeTopology(node=node, source=SOURCE, devices=tuple(devices), domains=tuple(domains))
