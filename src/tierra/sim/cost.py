"""The communication-cost model: how much slower a job runs where its pods landed.

Why a model at all: placement quality only matters through what it costs a job. Each
tier has a bandwidth per GPU and an oversubscription (so an effective bandwidth); a job
spends a share of its ideal run time communicating, and that share stretches by how much
slower the slowest tier its pods span is than the best tier the job could have had::

    slowdown = (1 - comm_share) + comm_share * B_best / B_span      (at most max_slowdown)

All numbers live in a YAML file (``cost-model.yaml`` beside this module holds the cited
defaults); ``load_cost_model`` reads a user's file with field-path errors, and
``CostModel.bind`` checks that every tier the cluster uses has an entry ("a cost model
with a missing tier" is an input error, never a silent default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from tierra.api.fields import Fields, Report
from tierra.api.files import read_yaml
from tierra.api.hypernode import LinkSpec
from tierra.api.node import Node
from tierra.errors import InputError, Origin, Problem
from tierra.topology.index import IntArray, TopologyIndex

API_VERSION = "sim.tierra.dev/v1alpha1"
KIND = "CostModel"
NODE_TIER = "node"
CLUSTER_TIER = "cluster"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
BUILTIN = "built-in cost model"

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class TierCost:
    """What a GPU's traffic gets when it has to cross a domain of this tier."""

    medium: str
    bandwidth_gbps: float
    oversubscription: float = 1.0

    @property
    def effective_gbps(self) -> float:
        return self.bandwidth_gbps / self.oversubscription

    def link(self) -> LinkSpec:
        return LinkSpec(
            medium=self.medium,
            bandwidth_gbps=self.bandwidth_gbps,
            oversubscription=self.oversubscription,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CostModel:
    tiers: Mapping[str, TierCost]
    max_slowdown: float = 2.5
    contention: bool = True  # jobs sharing an oversubscribed uplink slow each other
    slice_share: float = 0.5  # of a sliced job's communication, inside its slices
    source: str = BUILTIN

    def tier(self, name: str) -> TierCost | None:
        return self.tiers.get(name)

    def link(self, tier_name: str) -> LinkSpec | None:
        """``spec.link`` for a generated HyperNode of ``tier_name`` (None when unknown)."""
        cost = self.tiers.get(tier_name)
        return None if cost is None else cost.link()

    def slowdown(
        self,
        comm_share: float,
        best_gbps: float,
        span_gbps: float,
        layers: Sequence[tuple[float, float]] = (),
    ) -> float:
        """Stretch factor of a job's run time; 1.0 at its best placement.

        ``layers``: a sliced job's slice layers, each ``(best, worst slice's span)``
        bandwidth; they carry ``slice_share`` of its communication, evenly, and the
        whole job's span the rest (``tierra.sim.structure``)."""
        if comm_share <= 0:
            return 1.0
        if not layers:
            if span_gbps >= best_gbps:
                return 1.0
            stretch = (1.0 - comm_share) + comm_share * best_gbps / span_gbps
            return float(min(stretch, self.max_slowdown))
        inside = self.slice_share / len(layers)
        comm = (1.0 - self.slice_share) * max(1.0, best_gbps / span_gbps)
        comm += sum(inside * max(1.0, best / span) for best, span in layers)
        return float(min((1.0 - comm_share) + comm_share * comm, self.max_slowdown))

    def bind(self, index: TopologyIndex, nodes: Sequence[Node]) -> BoundCost:
        """Per-domain and per-node bandwidths for one cluster; every tier must be covered."""
        missing: dict[str, list[str]] = {}
        unknown = TierCost(medium="unknown", bandwidth_gbps=1.0)

        def lookup(key: str, user: str) -> TierCost:
            cost = self.tiers.get(key)
            if cost is None:
                missing.setdefault(key, []).append(user)
                return unknown
            return cost

        per_domain = [
            lookup(tier_key(hn.tier_name, int(index.tier[h])), hn.ref)
            for h, hn in enumerate(index.hypernodes)
        ]
        cross_tree = len(index.trees) > 1 or any(
            len(index.leaves_of(n)) == 0 for n in index.node_names
        )
        per_domain.append(
            lookup(CLUSTER_TIER, "jobs spanning more than one tree")
            if cross_tree
            else self.tiers.get(CLUSTER_TIER, unknown)
        )
        dom = np.array([c.effective_gbps for c in per_domain], dtype=np.float64)
        raw = np.array([c.bandwidth_gbps for c in per_domain], dtype=np.float64)
        over = np.array([c.oversubscription for c in per_domain], dtype=np.float64)
        node_bw = np.zeros(len(index.node_names), dtype=np.float64)
        for node in nodes:
            product = node.labels.get(GPU_PRODUCT_LABEL, "")
            special = self.tiers.get(f"{NODE_TIER}/{product}") if product else None
            value = (special or lookup(NODE_TIER, "pods sharing one node")).effective_gbps
            node_bw[index.node_ix[node.name]] = value
        if missing:
            problems = [
                Problem(
                    f"no entry for tier {key!r}, used by {_users(users)}; "
                    f"add `{key}: {{medium: ..., bandwidthGBps: ..., oversubscription: ...}}`",
                    Origin(self.source, 1) if self.source != BUILTIN else None,
                    KIND,
                    "tiers",
                )
                for key, users in sorted(missing.items())
            ]
            raise InputError(problems)
        return BoundCost(
            model=self,
            index=index,
            domain_gbps=dom,
            node_gbps=node_bw,
            domain_raw_gbps=raw,
            domain_oversubscription=over,
        )


def tier_key(tier_name: str | None, tier: int) -> str:
    """How a HyperNode's tier is looked up: its tier name, else ``tier<N>``."""
    return tier_name or f"tier{tier}"


def _users(users: list[str]) -> str:
    uniq = sorted(set(users))
    return uniq[0] if len(uniq) == 1 else f"{uniq[0]} and {len(uniq) - 1} more"


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundCost:
    """A cost model resolved against one cluster: arrays indexed like the topology index."""

    model: CostModel
    index: TopologyIndex
    domain_gbps: FloatArray  # effective bandwidth of each domain, the virtual root last
    node_gbps: FloatArray  # bandwidth between GPUs of one node
    domain_raw_gbps: FloatArray  # line rate per GPU of each domain's tier
    domain_oversubscription: FloatArray  # downlink:uplink of the uplinks into each domain

    def span(self, node_ixs: Sequence[int] | IntArray) -> tuple[int, float]:
        """The lowest domain holding every node in ``node_ixs`` and its bandwidth.

        Returns ``(-1, node bandwidth)`` when they are all one node. With several trees a
        node may sit in more than one; the fastest common domain wins.
        """
        distinct = np.unique(np.asarray(node_ixs, dtype=np.int64))
        if len(distinct) == 1:
            n = int(distinct[0])
            return -1, float(self.node_gbps[n])
        index = self.index
        owners = [index.domains_of(int(n)) for n in distinct]
        counts = np.bincount(np.concatenate(owners), minlength=index.root + 1)
        common = np.flatnonzero(counts == len(distinct))
        # the lowest tier first; among equals the fastest, then the lowest index
        best = min(
            common.tolist(),
            key=lambda h: (int(index.tier[h]), -float(self.domain_gbps[h]), h),
        )
        return best, float(self.domain_gbps[best])

    def tier_of_span(self, domain: int) -> int:
        return 0 if domain < 0 else int(self.index.tier[domain])

    def tier_name_of_span(self, domain: int) -> str:
        if domain < 0:
            return NODE_TIER
        if domain == self.index.root:
            return CLUSTER_TIER
        hn = self.index.hypernodes[domain]
        return tier_key(hn.tier_name, int(self.index.tier[domain]))


# -- reading ------------------------------------------------------------------------------


def default_cost_model_text() -> str:
    return resources.files("tierra.sim").joinpath("cost-model.yaml").read_text("utf-8")


def default_cost_model() -> CostModel:
    return parse_cost_model(yaml.safe_load(default_cost_model_text()), BUILTIN)


def load_cost_model(path: str | Path) -> CostModel:
    """Read a cost model file; every problem in it is reported at once (``InputError``)."""
    name = str(path)
    raw = read_yaml(path, expected="a cost model YAML file")
    return parse_cost_model(raw, name)


def parse_cost_model(raw: Any, source: str) -> CostModel:
    origin = Origin(source, 1) if source != BUILTIN else None
    sink: list[Problem] = []
    if not isinstance(raw, Mapping):
        raise InputError(Problem("expected a CostModel object", origin, KIND))
    f = Fields(raw, "", Report(origin, KIND, sink))
    kind = f.string("kind", KIND)
    if kind != KIND:
        f.problem("kind", f"expected {KIND}, got {kind!r}")
    max_slowdown = f.number("maxSlowdown")
    if max_slowdown is not None and max_slowdown < 1:
        f.problem("maxSlowdown", f"must be >= 1, got {max_slowdown}")
    contention = f.boolean("contention", True)
    slice_share = f.number("sliceShare")
    if slice_share is not None and not 0 <= slice_share <= 1:
        f.problem("sliceShare", f"must be between 0 and 1, got {slice_share}")
    tiers_f = f.obj("tiers", required=True)
    tiers: dict[str, TierCost] = {}
    for key in tiers_f.data:
        entry = tiers_f.obj(str(key))
        bw = entry.number("bandwidthGBps")
        over = entry.number("oversubscription")
        if bw is None:
            entry.problem("bandwidthGBps", "is required (per-GPU bandwidth in GB/s)")
        elif bw <= 0:
            entry.problem("bandwidthGBps", f"must be > 0, got {bw}")
        if over is not None and over < 1:
            entry.problem("oversubscription", f"must be >= 1 (downlink:uplink), got {over}")
        if bw is not None and bw > 0 and (over is None or over >= 1):
            tiers[str(key)] = TierCost(
                medium=entry.string("medium", "unknown"),
                bandwidth_gbps=bw,
                oversubscription=over or 1.0,
            )
    if tiers_f.data and NODE_TIER not in tiers_f.data:
        tiers_f.problem(NODE_TIER, "is required: the bandwidth between GPUs of one node")
    if sink:
        raise InputError(sink)
    return CostModel(
        tiers=tiers,
        max_slowdown=max_slowdown if max_slowdown is not None else 2.5,
        contention=contention,
        slice_share=slice_share if slice_share is not None else 0.5,
        source=source,
    )
