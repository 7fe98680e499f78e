"""PodGroups (``scheduling.volcano.sh/v1beta1``): gangs and their topology constraints.

The upstream Workload API's PodGroup (``tierra.api.workload``) becomes the same type; its
``api`` (``PodGroupApi``) says how its own API names the fields tierra reads, so every
message about it speaks that API (``schedulingPolicy.gang.minCount``, its topology key),
never Volcano's ``minMember`` or ``networkTopology.highestTierName``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.labels import LabelSelector, decode_label_selector
from tierra.api.meta import ObjectMeta, decode_meta, object_ref
from tierra.api.pod import PodClaim
from tierra.api.quantity import milli_to_quantity
from tierra.api.tierra_annotations import PREFERRED_TIER, PREFERRED_TIER_NAME, read_gang_topology
from tierra.errors import Origin, Problem, Severity

PODGROUP_API = "scheduling.volcano.sh/v1beta1"


class TopologyMode(enum.StrEnum):
    HARD = "hard"
    SOFT = "soft"


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitWords:
    """How a limit was written where it is none of Volcano's ``networkTopology`` fields
    (the upstream PodGroup's topology key, Kueue's pod annotations, tierra's ``slices``
    annotation), so every message about it names what the user wrote, never
    ``highestTierName``: the limit itself (``topology key example.com/rack``), how to ask
    for a wider domain (``{}`` stands for the key or tier name that would do; None: no
    such advice) and how to let the whole cluster hold the gang (None: none)."""

    limit: str
    wider: str | None = None
    whole: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkTopology:
    """Volcano's ``networkTopology``; tierra adds a preferred tier beside the required one.

    ``preferred_tier_allowed`` / ``preferred_tier_name`` (wire: ``preferredTierAllowed``,
    ``preferredTierName``) ask for a tighter domain when one is free without making it a
    requirement: "required within tier 2, preferred within tier 1".
    """

    mode: TopologyMode = TopologyMode.HARD
    highest_tier_allowed: int | None = None
    highest_tier_name: str | None = None
    preferred_tier_allowed: int | None = None
    preferred_tier_name: str | None = None
    # an upstream PodGroup's ``schedulingConstraints.topology[0].key`` this limit was read
    # from (``highest_tier_name`` is the tier it resolves to): messages name the key
    key: str | None = None
    words: LimitWords | None = None  # how the limit was written, where not in these fields
    # the annotation the preferred tier was read from (``topology.tierra.dev/preferred-
    # tier`` or ``-name``), None when from ``spec.networkTopology`` itself
    preferred_from: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": str(self.mode)}
        if self.highest_tier_allowed is not None:
            out["highestTierAllowed"] = self.highest_tier_allowed
        if self.highest_tier_name is not None:
            out["highestTierName"] = self.highest_tier_name
        if self.preferred_tier_allowed is not None:
            out["preferredTierAllowed"] = self.preferred_tier_allowed
        if self.preferred_tier_name is not None:
            out["preferredTierName"] = self.preferred_tier_name
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PodGroupApi:
    """What a PodGroup's own API calls the fields tierra reads, for the messages about it."""

    group: str
    min_member: str  # the gang's minimum, as a field path its users know
    topology: str  # where its topology constraint lives
    unconstrained: str  # a gang with no topology constraint, in its words
    soft: str | None  # the limit that lets a gang take any domain (None: the API has none)

    def lower_min(self, n: int) -> str:
        """The advice to ask for fewer pods, in its own field's words."""
        return f"lower {self.min_member} to {n}"


VOLCANO_WORDS = PodGroupApi(
    group="scheduling.volcano.sh",
    min_member="minMember",
    topology="spec.networkTopology",
    unconstrained="no networkTopology",
    soft="mode: soft",
)
WORKLOAD_WORDS = PodGroupApi(
    group="scheduling.k8s.io",
    min_member="schedulingPolicy.gang.minCount",
    topology="spec.schedulingConstraints.topology",
    unconstrained="no spec.schedulingConstraints.topology",
    soft=None,
)


def key_words(key: str) -> LimitWords:
    """The words of an upstream PodGroup's topology key (``spec.schedulingConstraints``)."""
    return LimitWords(
        limit=f"topology key {key}", wider="key: {}", whole=f"drop {WORKLOAD_WORDS.topology}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SubGroupPolicy:
    name: str
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    sub_group_size: int = 1
    min_sub_groups: int = 0
    network_topology: NetworkTopology | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodGroup:
    meta: ObjectMeta
    min_member: int = 1
    min_resources: Mapping[str, int] = field(default_factory=dict)
    queue: str = "default"
    priority_class_name: str = ""
    network_topology: NetworkTopology | None = None
    sub_group_policies: tuple[SubGroupPolicy, ...] = ()
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    phase: str = ""
    api: PodGroupApi = VOLCANO_WORDS  # which API it came from, for the words about it
    # an upstream PodGroup's spec.resourceClaims (DRAWorkloadResourceClaims), a template's
    # claim named once the resourceclaim controller recorded it in status
    resource_claims: tuple[PodClaim, ...] = ()
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"


def decode_network_topology(f: Fields) -> NetworkTopology | None:
    if not f.data:
        return None
    mode = f.enum("mode", ("hard", "soft"), "hard")
    nt = NetworkTopology(
        mode=TopologyMode(mode),
        highest_tier_allowed=f.opt_int("highestTierAllowed", minimum=0),
        highest_tier_name=f.opt_str("highestTierName"),
        preferred_tier_allowed=f.opt_int("preferredTierAllowed", minimum=0),
        preferred_tier_name=f.opt_str("preferredTierName"),
    )
    if nt.highest_tier_allowed is not None and nt.highest_tier_name is not None:
        f.problem("", "must not specify 'highestTierAllowed' and 'highestTierName' together")
    if nt.preferred_tier_allowed is not None and nt.preferred_tier_name is not None:
        f.problem("", "must not specify 'preferredTierAllowed' and 'preferredTierName' together")
    return nt


_PRUNED = (
    "Volcano's PodGroup CRD (and tierra's, which follows it) does not define this field, so "
    "a cluster refuses or drops it; write it as annotation {} instead"
)


def with_annotations(
    f: Fields, meta: ObjectMeta, nt: NetworkTopology | None, spec_path: str
) -> NetworkTopology | None:
    """``nt`` with the preferred tier of the PodGroup's tierra annotations (where it lives
    on a cluster, ``tierra.api.tierra_annotations``); their problems located on ``f``."""
    topo, problems = read_gang_topology(meta.annotations)
    for key, message in problems:
        f.report.add(f"metadata.annotations[{key}]", message)
    if nt is not None:
        for field_name, key in (
            ("preferredTierAllowed", PREFERRED_TIER),
            ("preferredTierName", PREFERRED_TIER_NAME),
        ):
            value = getattr(
                nt, "preferred_tier_allowed" if key == PREFERRED_TIER else "preferred_tier_name"
            )
            if value is not None:
                f.report.add(f"{spec_path}.{field_name}", _PRUNED.format(key), Severity.WARNING)
    if topo is None or (topo.preferred_tier is None and topo.preferred_tier_name is None):
        return nt
    if nt is not None and (nt.preferred_tier_allowed, nt.preferred_tier_name) not in (
        (None, None),
        (topo.preferred_tier, topo.preferred_tier_name),
    ):
        f.report.add(
            f"{spec_path}",
            "names a preferred tier different from the PodGroup's annotation "
            f"{PREFERRED_TIER if topo.preferred_tier is not None else PREFERRED_TIER_NAME}",
        )
    base = nt if nt is not None else NetworkTopology(mode=TopologyMode.SOFT)
    return replace(
        base,
        preferred_tier_allowed=topo.preferred_tier,
        preferred_tier_name=topo.preferred_tier_name,
        preferred_from=PREFERRED_TIER if topo.preferred_tier is not None else PREFERRED_TIER_NAME,
    )


def _decode_policy(f: Fields) -> SubGroupPolicy:
    selector = decode_label_selector(f.obj("labelSelector")) if f.has("labelSelector") else None
    return SubGroupPolicy(
        name=f.string("name", required=True),
        label_selector=selector,
        match_label_keys=tuple(f.str_list("matchLabelKeys")),
        sub_group_size=f.integer("subGroupSize", 1, minimum=1),
        min_sub_groups=f.integer("minSubGroups", 0, minimum=0),
        network_topology=decode_network_topology(f.obj("networkTopology")),
    )


def _decode_int_map(f: Fields, key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    sub = f.obj(key)
    for k in sub.data:
        v = sub.integer(str(k), -1, minimum=0)
        if v >= 0:
            out[str(k)] = v
    return out


def decode_podgroup(raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]) -> PodGroup:
    f = Fields(raw, "", Report(origin, object_ref(raw, "PodGroup", namespaced=True), sink))
    meta = decode_meta(f, namespaced=True)
    spec = f.obj("spec")
    return PodGroup(
        meta=meta,
        min_member=spec.integer("minMember", 1, minimum=0),
        min_resources=spec.resources("minResources"),
        queue=spec.string("queue", "default") or "default",
        priority_class_name=spec.string("priorityClassName"),
        network_topology=with_annotations(
            f, meta, decode_network_topology(spec.obj("networkTopology")), "spec.networkTopology"
        ),
        sub_group_policies=tuple(_decode_policy(p) for p in spec.objects("subGroupPolicy")),
        min_task_member=_decode_int_map(spec, "minTaskMember"),
        phase=f.obj("status").string("phase"),
        origin=origin,
    )


def encode_podgroup(pg: PodGroup) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": pg.min_member, "queue": pg.queue}
    if pg.min_resources:
        spec["minResources"] = {k: milli_to_quantity(v) for k, v in pg.min_resources.items()}
    if pg.priority_class_name:
        spec["priorityClassName"] = pg.priority_class_name
    meta = pg.meta.to_dict()
    if pg.network_topology:
        nt = pg.network_topology
        # the preferred tier lives in annotations: Volcano's CRD would drop it from spec
        spec["networkTopology"] = replace(
            nt, preferred_tier_allowed=None, preferred_tier_name=None
        ).to_dict()
        ann = dict(meta.get("annotations", {}))
        if nt.preferred_tier_allowed is not None:
            ann[PREFERRED_TIER] = str(nt.preferred_tier_allowed)
        if nt.preferred_tier_name is not None:
            ann[PREFERRED_TIER_NAME] = nt.preferred_tier_name
        if ann:
            meta["annotations"] = ann
    if pg.min_task_member:
        spec["minTaskMember"] = dict(pg.min_task_member)
    if pg.sub_group_policies:
        policies = []
        for p in pg.sub_group_policies:
            d: dict[str, Any] = {"name": p.name, "subGroupSize": p.sub_group_size}
            if p.label_selector is not None:
                d["labelSelector"] = p.label_selector.to_dict()
            if p.match_label_keys:
                d["matchLabelKeys"] = list(p.match_label_keys)
            if p.min_sub_groups:
                d["minSubGroups"] = p.min_sub_groups
            if p.network_topology:
                d["networkTopology"] = p.network_topology.to_dict()
            policies.append(d)
        spec["subGroupPolicy"] = policies
    return {
        "apiVersion": PODGROUP_API,
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
    }
