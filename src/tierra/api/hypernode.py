"""HyperNode: one topology domain (a leaf switch, an NVLink rack, a spine, a zone).

A superset of Volcano's ``topology.volcano.sh/v1alpha1`` HyperNode: the same members
and selectors with the same meaning, so Volcano objects load unchanged. tierra's own
group ``topology.tierra.dev/v1alpha1`` adds ``spec.link`` (what the domain's links can
do, for the cost model) and a health status (conditions, unhealthy nodes, a real
recursive node count). Converting tierra -> Volcano keeps the extras in annotations, so
Volcano -> tierra restores them: a round trip through either group loses nothing.

A HyperNode is (API group, name): the two groups are two name spaces, so ``rack-a`` in
each is two objects (``HyperNodeKey``). Where a name alone is ambiguous, tierra names one
``group/name`` (``qualified``); where the controller mirrors its own group into Volcano's
(both copies carry its managed-by label, ``MANAGED_BY``), the topology index schedules by
tierra's copy (``tierra.topology.mirrors``).

Schema rules are checked while decoding, as Volcano's CRD and admission policy check
them (one selector per member, exact names that are DNS subdomains and qualified names,
``tierName`` of at most 253 characters, RE2 patterns, tier >= 0, at least one member);
graph rules (cycles, parents, tier order)
need every HyperNode at once and live in ``tierra.topology.validation``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from tierra.api.fields import Fields, Report
from tierra.api.labels import LabelSelector, decode_label_selector
from tierra.api.meta import (
    DNS_SUBDOMAIN_MAX,
    ObjectMeta,
    decode_meta,
    dns_subdomain_problem,
    object_ref,
    qualified_name_problem,
)
from tierra.api.node import Condition, decode_condition
from tierra.api.regex import compile_pattern
from tierra.errors import Origin, Problem

TIERRA_GROUP = "topology.tierra.dev"
VOLCANO_GROUP = "topology.volcano.sh"
VERSION = "v1alpha1"
GROUPS = (TIERRA_GROUP, VOLCANO_GROUP)

MANAGED_BY = "topology.tierra.dev/managed-by"
"""Ownership label: tierra's controller writes it, with the source's owner, on every
HyperNode it makes, in each group it writes (so a Volcano copy is known for one)."""

LINK_ANNOTATION = "topology.tierra.dev/link"
UNHEALTHY_ANNOTATION = "topology.tierra.dev/unhealthy-nodes"


class HyperNodeKey(NamedTuple):
    """A HyperNode's identity: two groups are two name spaces (DESIGN.md's "Identity")."""

    group: str
    name: str

    def __str__(self) -> str:
        return qualified(self.group, self.name)


def qualified(group: str, name: str) -> str:
    """``group/name``: what tierra calls a HyperNode whose name both groups hold (a
    HyperNode name is a DNS subdomain, never holding a ``/``, so this parses back)."""
    return f"{group}/{name}"


def parse_qualified(text: str) -> HyperNodeKey | None:
    """The key ``text`` names when written ``group/name`` with a HyperNode group, else None."""
    group, sep, name = text.partition("/")
    return HyperNodeKey(group, name) if sep and group in GROUPS and name else None


def named(label: str | None, field: str = "hyperNode") -> dict[str, str | None]:
    """A HyperNode as JSON names it, from what tierra calls it (``label``: its name, or
    ``group/name`` where both groups hold the name): ``{field: name}``, and
    ``{field}Group`` only where the name alone is ambiguous. Every JSON output that names
    a HyperNode in a field of its own says it so (``tierra schedule -o json``'s bindings,
    explain's candidates, the dashboard's gangs), so a reader keyed on the name reads one
    field and only a namesake's needs the second."""
    key = parse_qualified(label) if label else None
    if key is None:
        return {field: label}
    return {field: key.name, f"{field}Group": key.group}


class MemberType(enum.StrEnum):
    NODE = "Node"
    HYPERNODE = "HyperNode"


@dataclass(frozen=True, slots=True)
class MemberSelector:
    """Exactly one of the three should be set; decoding reports when it is not."""

    exact: str | None = None
    regex: str | None = None
    labels: LabelSelector | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        out = []
        if self.exact is not None:
            out.append("exactMatch")
        if self.regex is not None:
            out.append("regexMatch")
        if self.labels is not None:
            out.append("labelMatch")
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.exact is not None:
            out["exactMatch"] = {"name": self.exact}
        if self.regex is not None:
            out["regexMatch"] = {"pattern": self.regex}
        if self.labels is not None:
            out["labelMatch"] = self.labels.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class Member:
    type: MemberType
    selector: MemberSelector

    def to_dict(self) -> dict[str, Any]:
        return {"type": str(self.type), "selector": self.selector.to_dict()}


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """What the links inside this domain can do; the cost model reads it.

    ``bandwidth_gbps`` is per GPU, in GB/s (an NVLink domain ~ 900, an NDR leaf ~ 50);
    ``oversubscription`` is downlink:uplink (2.0 means 2:1).
    """

    medium: str | None = None
    bandwidth_gbps: float | None = None
    latency_us: float | None = None
    oversubscription: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.medium is not None:
            out["medium"] = self.medium
        if self.bandwidth_gbps is not None:
            out["bandwidthGBps"] = self.bandwidth_gbps
        if self.latency_us is not None:
            out["latencyMicroseconds"] = self.latency_us
        if self.oversubscription is not None:
            out["oversubscription"] = self.oversubscription
        return out


@dataclass(frozen=True, slots=True)
class UnhealthyNode:
    name: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperNodeStatus:
    node_count: int | None = None
    conditions: tuple[Condition, ...] = ()
    unhealthy_nodes: tuple[UnhealthyNode, ...] = ()

    @property
    def empty(self) -> bool:
        return self.node_count is None and not self.conditions and not self.unhealthy_nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperNode:
    meta: ObjectMeta
    tier: int
    members: tuple[Member, ...]
    tier_name: str | None = None
    group: str = TIERRA_GROUP
    link: LinkSpec | None = None
    status: HyperNodeStatus = field(default_factory=HyperNodeStatus)
    origin: Origin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> HyperNodeKey:
        return HyperNodeKey(self.group, self.meta.name)

    @property
    def ref(self) -> str:
        return f"HyperNode/{self.meta.name}"


def exact_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an ``exactMatch.name``, or None.

    Volcano refuses it at admission unless it passes both its CRD's pattern (a DNS
    subdomain, 1-253 characters) and its ValidatingAdmissionPolicy (not empty, and a
    qualified name: so at most 63 characters, since a DNS subdomain has no '/').
    """
    if not name:
        return "must not be empty (Volcano's admission: member exactMatch name is required)"
    return dns_subdomain_problem(name) or qualified_name_problem(name)


def _decode_member(f: Fields) -> Member | None:
    type_text = f.string("type", required=True)
    try:
        mtype = MemberType(type_text)
    except ValueError:
        if type_text:
            f.problem("type", f"must be Node or HyperNode; got {type_text!r}")
        mtype = None
    sel = f.obj("selector", required=True)
    exact = regex = None
    labels = None
    if sel.has("exactMatch"):
        em = sel.obj("exactMatch")
        exact = em.string("name", required=True)
        if isinstance(em.data.get("name"), str) and (why := exact_name_problem(exact)):
            em.problem("name", why)
    if sel.has("regexMatch"):
        rm = sel.obj("regexMatch")
        regex = rm.string("pattern", required=True)
        if not regex:
            if rm.has("pattern"):
                rm.problem("pattern", "must not be empty")
        elif isinstance(why_re := compile_pattern(regex), str):
            rm.problem("pattern", why_re)
    if sel.has("labelMatch"):
        labels = decode_label_selector(sel.obj("labelMatch"))
    selector = MemberSelector(exact=exact, regex=regex, labels=labels)
    kinds = selector.kinds
    if not kinds and "selector" in f.data:
        sel.problem("", "needs exactly one of exactMatch, regexMatch or labelMatch; got none")
    elif len(kinds) > 1:
        sel.problem(
            "",
            f"needs exactly one of exactMatch, regexMatch or labelMatch; got {' and '.join(kinds)}",
        )
    if mtype is MemberType.HYPERNODE and (regex is not None or labels is not None):
        which = "regexMatch" if regex is not None else "labelMatch"
        sel.problem(
            which, "a HyperNode member is named by exactMatch only (Volcano ignores this selector)"
        )
    if mtype is None:
        return None
    return Member(mtype, selector)


def _decode_link(f: Fields) -> LinkSpec | None:
    if not f.data:
        return None
    link = LinkSpec(
        medium=f.opt_str("medium"),
        bandwidth_gbps=f.number("bandwidthGBps"),
        latency_us=f.number("latencyMicroseconds"),
        oversubscription=f.number("oversubscription"),
    )
    for key, value in (
        ("bandwidthGBps", link.bandwidth_gbps),
        ("latencyMicroseconds", link.latency_us),
    ):
        if value is not None and value < 0:
            f.problem(key, f"must not be negative, got {value}")
    if link.oversubscription is not None and link.oversubscription < 1:
        f.problem(
            "oversubscription", f"must be >= 1 (downlink:uplink), got {link.oversubscription}"
        )
    return link


def decode_hypernode(
    raw: Mapping[str, Any], origin: Origin | None, sink: list[Problem]
) -> HyperNode:
    """Decode either group's HyperNode; schema problems go to ``sink``, never raised."""
    written = str(raw.get("apiVersion", "")).split("/")[0] or TIERRA_GROUP
    group = written if written in GROUPS else TIERRA_GROUP
    report = Report(origin, object_ref(raw, "HyperNode"), sink, group)
    f = Fields(raw, "", report)
    meta = decode_meta(f, namespaced=False)
    if meta.name and (why := dns_subdomain_problem(meta.name)):
        f.obj("metadata").problem("name", why)
    spec = f.obj("spec", required=True)
    # at most int32 (the CRD's type; numpy's int64 index would overflow past it)
    tier = spec.integer("tier", -1, required=True, minimum=0)
    tier_name = spec.opt_str("tierName")
    if tier_name is not None and len(tier_name) > DNS_SUBDOMAIN_MAX:  # Volcano's CRD maxLength
        spec.problem(
            "tierName", f"must be at most {DNS_SUBDOMAIN_MAX} characters, got {len(tier_name)}"
        )
    members_raw = spec.raw("members")
    if spec.data and (members_raw is None or members_raw == []):
        spec.problem("members", "needs at least one member")
    members = [m for m in (_decode_member(mf) for mf in spec.objects("members")) if m is not None]
    link = _decode_link(spec.obj("link"))
    st = f.obj("status")
    annotations = dict(meta.annotations)
    unhealthy = [
        UnhealthyNode(u.string("name", required=True), u.string("reason"))
        for u in st.objects("unhealthyNodes")
    ]
    # Extras carried through a Volcano object in annotations come back as fields.
    if LINK_ANNOTATION in annotations:
        text = annotations.pop(LINK_ANNOTATION)
        link = link or _decode_link(_json_fields(text, f, LINK_ANNOTATION))
    if UNHEALTHY_ANNOTATION in annotations:
        text = annotations.pop(UNHEALTHY_ANNOTATION)
        extra = _json_list(text, f, UNHEALTHY_ANNOTATION)
        unhealthy = unhealthy or [
            UnhealthyNode(str(u.get("name", "")), str(u.get("reason", ""))) for u in extra
        ]
    if annotations != meta.annotations:
        meta = replace(meta, annotations=annotations)
    status = HyperNodeStatus(
        node_count=st.opt_int("nodeCount", minimum=0),
        conditions=tuple(decode_condition(c) for c in st.objects("conditions")),
        unhealthy_nodes=tuple(unhealthy),
    )
    return HyperNode(
        meta=meta,
        tier=tier,
        tier_name=tier_name,
        members=tuple(members),
        group=group,
        link=link,
        status=status,
        origin=origin,
    )


def _json_fields(text: str, f: Fields, key: str) -> Fields:
    path = f"metadata.annotations.{key}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        f.report.add(path, f"is not JSON: {exc}")
        return Fields({}, path, f.report)
    if not isinstance(data, dict):
        f.report.add(path, "expected a JSON object")
        return Fields({}, path, f.report)
    return Fields(data, path, f.report)


def _json_list(text: str, f: Fields, key: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        f.report.add(f"metadata.annotations.{key}", f"is not JSON: {exc}")
        return []
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def encode_hypernode(hn: HyperNode, group: str | None = None) -> dict[str, Any]:
    """The manifest in ``group`` (default: its own); Volcano keeps extras in annotations."""
    group = group or hn.group
    meta = hn.meta.to_dict()
    spec: dict[str, Any] = {"tier": hn.tier}
    if hn.tier_name is not None:
        spec["tierName"] = hn.tier_name
    spec["members"] = [m.to_dict() for m in hn.members]
    status: dict[str, Any] = {}
    if hn.status.conditions:
        status["conditions"] = [c.to_dict() for c in hn.status.conditions]
    if hn.status.node_count is not None:
        status["nodeCount"] = hn.status.node_count
    unhealthy = [u.to_dict() for u in hn.status.unhealthy_nodes]
    if group == TIERRA_GROUP:
        if hn.link is not None:
            spec["link"] = hn.link.to_dict()
        if unhealthy:
            status["unhealthyNodes"] = unhealthy
    else:
        annotations = dict(meta.get("annotations", {}))
        if hn.link is not None:
            annotations[LINK_ANNOTATION] = json.dumps(hn.link.to_dict(), sort_keys=True)
        if unhealthy:
            annotations[UNHEALTHY_ANNOTATION] = json.dumps(unhealthy, sort_keys=True)
        if annotations:
            meta["annotations"] = annotations
    out: dict[str, Any] = {
        "apiVersion": f"{group}/{VERSION}",
        "kind": "HyperNode",
        "metadata": meta,
        "spec": spec,
    }
    if status:
        out["status"] = status
    return out
