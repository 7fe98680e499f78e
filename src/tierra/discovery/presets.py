"""Label topologies clusters already carry: cloud presets and Kueue/KAI Topology objects.

Label keys (see research/peers.md §9 and §4):

* ``eks``: ``topology.k8s.aws/network-node-layer-1`` (top) ... ``-3``, and ``-4`` on
  4-layer instance types. Two topologies: 4-layer nodes (those carrying ``-4``) and
  3-layer nodes (those without), so neither kind is dropped for lacking the other's
  bottom label. They form separate forests: their network nodes differ anyway.
* ``gke``: ``cloud.google.com/gce-topology-block`` / ``-subblock`` / ``-host``.
* ``oke``: ``oci.oraclecloud.com/rdma.hpc_island_id`` / ``rdma.network_block_id`` /
  ``rdma.local_block_id`` (``rdma.host_id`` identifies the physical host, like a hostname).
* ``nvidia-clique``: ``nvidia.com/gpu.clique``, the NVLink domain (multi-node NVLink,
  GB200 NVL72) that GPU Feature Discovery sets; one tier, medium ``nvlink``.
* ``topograph``: ``fabric.topograph.run/tier-N`` (tier 0 is the closest switch, no
  maximum depth; up to tier 9 is read) and, as a separate forest,
  ``accelerator.topograph.run/domain``: Topograph keeps the NVLink domain and the
  fabric as two dimensions, and so does tierra.
* ``kueue`` / ``kai``: the levels of a ``Topology`` object (``kueue.x-k8s.io`` or
  ``kai.scheduler``) given as input; KAI aliases become tier names. A Kueue
  ``ResourceFlavor`` naming the Topology limits it to nodes with the flavor's
  ``nodeLabels``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.hypernode import LinkSpec
from tierra.api.labels import LabelSelector, Operator, Requirement
from tierra.api.meta import object_ref
from tierra.discovery.labels import LabelLevel, LabelTopology, make_topology
from tierra.errors import ConfigError, Origin, Problem

EKS = "topology.k8s.aws/network-node-layer-"
GKE = "cloud.google.com/gce-topology-"
OKE = "oci.oraclecloud.com/rdma."
CLIQUE = "nvidia.com/gpu.clique"
TOPOGRAPH_TIER = "fabric.topograph.run/tier-"
TOPOGRAPH_DOMAIN = "accelerator.topograph.run/domain"
TOPOGRAPH_MAX_TIER = 9

NVLINK = LinkSpec(medium="nvlink")


def _eks() -> tuple[LabelTopology, ...]:
    four = f"{EKS}4"
    has4 = LabelSelector(match_expressions=(Requirement(four, Operator.EXISTS),))
    no4 = LabelSelector(match_expressions=(Requirement(four, Operator.DOES_NOT_EXIST),))
    return (
        make_topology("eks", [f"{EKS}{i}" for i in (1, 2, 3, 4)], selectors=[has4]),
        make_topology("eks-3layer", [f"{EKS}{i}" for i in (1, 2, 3)], selectors=[no4]),
    )


def _clique() -> tuple[LabelTopology, ...]:
    return (LabelTopology("nvlink", (LabelLevel(CLIQUE, "nvlink-clique", NVLINK),)),)


def _topograph() -> tuple[LabelTopology, ...]:
    tiers = [f"{TOPOGRAPH_TIER}{i}" for i in range(TOPOGRAPH_MAX_TIER, -1, -1)]
    return (
        make_topology("topograph", tiers),
        LabelTopology("topograph-nvl", (LabelLevel(TOPOGRAPH_DOMAIN, None, NVLINK),)),
    )


STATIC_PRESETS: Mapping[str, tuple[LabelTopology, ...]] = {
    "eks": _eks(),
    "gke": (make_topology("gke", [f"{GKE}block", f"{GKE}subblock", f"{GKE}host"]),),
    "oke": (
        make_topology(
            "oke",
            [f"{OKE}hpc_island_id", f"{OKE}network_block_id", f"{OKE}local_block_id"],
        ),
    ),
    "nvidia-clique": _clique(),
    "topograph": _topograph(),
}
OBJECT_PRESETS = ("kueue", "kai")
PRESETS = (*sorted(STATIC_PRESETS), *OBJECT_PRESETS)

_GROUPS = {"kueue": "kueue.x-k8s.io", "kai": "kai.scheduler"}


def preset(
    name: str, documents: Iterable[tuple[Origin, Mapping[str, Any]]] = ()
) -> tuple[LabelTopology, ...]:
    """The topologies of preset ``name``; ``kueue`` and ``kai`` read ``documents``."""
    if name in STATIC_PRESETS:
        return STATIC_PRESETS[name]
    if name not in _GROUPS:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return topologies_from_objects(name, documents)


def topologies_from_objects(
    flavour: str, documents: Iterable[tuple[Origin, Mapping[str, Any]]]
) -> tuple[LabelTopology, ...]:
    """Every ``Topology`` of the Kueue or KAI group in ``documents``, as label topologies."""
    group = _GROUPS[flavour]
    docs = list(documents)
    flavors: dict[str, list[LabelSelector]] = {}
    for origin, doc in docs:
        if doc.get("kind") == "ResourceFlavor" and _in_group(doc, "kueue.x-k8s.io"):
            spec = _fields(origin, doc, "ResourceFlavor", []).obj("spec")
            topo_name = spec.opt_str("topologyName")
            node_labels = spec.str_map("nodeLabels")
            if topo_name and node_labels:
                flavors.setdefault(topo_name, []).append(LabelSelector(match_labels=node_labels))
    out: list[LabelTopology] = []
    for origin, doc in docs:
        if doc.get("kind") != "Topology" or not _in_group(doc, group):
            continue
        problems: list[Problem] = []
        f = _fields(origin, doc, "Topology", problems)
        name = f.obj("metadata").string("name") or flavour
        levels = f.obj("spec").objects("levels")
        if not levels and not problems:
            f.problem("spec.levels", "must be a non-empty list")
        keys = [level.string("nodeLabel", required=True) for level in levels]
        aliases = [level.opt_str("alias") or None for level in levels]
        if problems:
            raise ConfigError("\n".join(str(p) for p in problems))
        try:
            out.append(
                make_topology(name, keys, tier_names=aliases, selectors=flavors.get(name, ()))
            )
        except ConfigError as exc:
            raise ConfigError(f"{origin}: Topology/{name}: {exc}") from None
    if not out:
        raise ConfigError(
            f"preset {flavour} needs a {group} Topology object among the input files; none found"
        )
    return tuple(out)


def _in_group(doc: Mapping[str, Any], group: str) -> bool:
    return str(doc.get("apiVersion", "")).startswith(f"{group}/")


def _fields(origin: Origin, doc: Mapping[str, Any], kind: str, sink: list[Problem]) -> Fields:
    """``doc`` read through ``Fields``; problems name ``kind/name`` and the field path."""
    return Fields(doc, "", Report(origin, object_ref(doc, kind), sink))
