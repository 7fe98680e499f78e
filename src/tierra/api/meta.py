"""Object metadata shared by every kind, and the name rules Kubernetes enforces."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tierra.api.fields import Fields

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
_QUALIFIED_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def dns_subdomain_problem(name: str) -> str | None:
    """Why ``name`` is not a DNS subdomain (RFC 1123), or None if it is one."""
    if not name:
        return "must not be empty"
    if len(name) > DNS_SUBDOMAIN_MAX:
        return f"must be at most {DNS_SUBDOMAIN_MAX} characters, got {len(name)}"
    if not DNS_SUBDOMAIN.match(name):
        return (
            f"{name!r} is not a DNS subdomain: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return None


def qualified_name_problem(name: str) -> str | None:
    """Why ``name`` is not a Kubernetes qualified name (``[prefix/]name``, the name part
    at most 63 characters), or None. It is the rule of CEL's ``format.qualifiedName()``,
    which Volcano's admission policy applies to every ``exactMatch.name``."""
    parts = name.split("/")
    if len(parts) > 2:
        return f"{name!r} is not a qualified name: at most one '/'"
    part = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            return f"{name!r} is not a qualified name: the prefix before '/' is empty"
        if why := dns_subdomain_problem(parts[0]):
            return f"{name!r} is not a qualified name: its prefix {why}"
    if not part:
        return "must not be empty"
    if len(part) > QUALIFIED_NAME_MAX:
        return (
            f"must be a qualified name, whose name part is at most {QUALIFIED_NAME_MAX} "
            f"characters; got {len(part)}"
        )
    if not _QUALIFIED_PART.match(part):
        return (
            f"{name!r} is not a qualified name: alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        )
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMeta:
    """The metadata tierra reads; ``extra`` keeps the rest so a round trip loses nothing.

    ``created`` is ``creationTimestamp`` in seconds since the epoch (None when absent):
    the scheduler takes gangs of equal priority oldest first, as Volcano and Kueue do."""

    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    created: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.created is not None:
            out["creationTimestamp"] = format_time(self.created)
        out.update(self.extra)
        return out


_KNOWN_META = frozenset({"name", "namespace", "uid", "labels", "annotations", "creationTimestamp"})


def parse_time(text: str) -> float | None:
    """An RFC 3339 time as Kubernetes writes it (``2026-01-02T03:04:05Z``) in seconds since
    the epoch, or None if it is not one."""
    if not isinstance(text, str) or "T" not in text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def format_time(seconds: float) -> str:
    """Seconds since the epoch as RFC 3339 in UTC (whole seconds as the API writes them;
    fractions kept when there are some, so a simulated arrival round-trips)."""
    when = datetime.fromtimestamp(seconds, UTC)
    text = when.isoformat(timespec="microseconds" if seconds % 1 else "seconds")
    return text.replace("+00:00", "Z")


def object_ref(raw: Mapping[str, Any], kind: str, *, namespaced: bool = False) -> str:
    """``Kind/name`` (``Kind/namespace/name``) naming ``raw`` in problems, whatever its shape.

    Runs before the metadata is validated, so ``metadata: []`` must not crash it.
    """
    md = raw.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    if namespaced:
        return f"{kind}/{md.get('namespace', 'default')}/{md.get('name', '?')}"
    return f"{kind}/{md.get('name', '?')}"


def decode_meta(f: Fields, *, namespaced: bool) -> ObjectMeta:
    meta = f.obj("metadata", required=True)
    name = meta.string("name", required=True)
    namespace = meta.string("namespace", "default" if namespaced else "") if namespaced else ""
    extra = {k: v for k, v in meta.data.items() if k not in _KNOWN_META}
    created = None
    stamp = meta.data.get("creationTimestamp")
    if stamp is not None:
        created = parse_time(stamp)
        if created is None:
            meta.problem(
                "creationTimestamp",
                f"expected an RFC 3339 time like 2026-01-02T03:04:05Z, got {stamp!r}",
            )
    return ObjectMeta(
        name=name,
        namespace=namespace,
        uid=meta.string("uid"),
        labels=meta.str_map("labels"),
        annotations=meta.str_map("annotations"),
        created=created,
        extra=extra,
    )
