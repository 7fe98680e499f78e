"""One way from a raw API object to tierra's object and its problems, for every live reader.

The scheduler's informers, the admission webhook and the dashboard all receive dicts from
the API server and turn them into ``tierra.api`` objects with the same decoders a snapshot
file uses. They differ only in how much metadata they keep, which is the ``Meta`` given
here, so a fix in how problems are gathered or metadata is trimmed reaches all three:

* ``Meta.ALL``: everything, ``ObjectMeta.extra`` included (the webhook judges the object
  as it was sent);
* ``Meta.READ``: only the metadata tierra reads; ``extra`` (resourceVersion,
  managedFields, ...) is dropped after decoding, so an object whose only change is server
  bookkeeping compares equal to the one before (the dashboard ignores it);
* ``Meta.LEAN``: as ``READ``, trimmed before decoding and without the
  last-applied-configuration annotation (the scheduler's cache holds every pod of a
  cluster; managedFields alone are often larger than the rest of a pod).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from tierra.api.meta import ObjectMeta
from tierra.errors import Problem, Severity

DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
LEAN_METADATA = ("name", "namespace", "uid", "labels", "creationTimestamp")


class HasMeta(Protocol):
    @property
    def meta(self) -> ObjectMeta: ...


T = TypeVar("T")
M = TypeVar("M", bound=HasMeta)
Decoder = Callable[[Mapping[str, Any], Any, list[Problem]], T]
"""An ``api`` decoder: ``decode_node``, ``decode_hypernode``, ... (raw, origin, problems)."""


class Meta(enum.Enum):
    ALL = "all"
    READ = "read"
    LEAN = "lean"


def trim(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with only the metadata ``Meta.LEAN`` keeps (a shallow copy)."""
    md = raw.get("metadata")
    if not isinstance(md, Mapping):
        return dict(raw)
    kept: dict[str, Any] = {k: md[k] for k in LEAN_METADATA if k in md}
    annotations = md.get("annotations")
    if isinstance(annotations, Mapping):
        kept["annotations"] = {k: v for k, v in annotations.items() if k not in DROPPED_ANNOTATIONS}
    out = dict(raw)
    out["metadata"] = kept
    return out


def decode(
    decoder: Decoder[M], raw: Mapping[str, Any], *, meta: Meta = Meta.ALL
) -> tuple[M, tuple[Problem, ...]]:
    """The object ``decoder`` makes of ``raw``, and every problem found on the way.

    The object is usable whatever the problems (the decoders' safe defaults); whether an
    error keeps it out is the caller's decision (the webhook refuses it, the scheduler
    makes its tree unusable, the dashboard shows it)."""
    problems: list[Problem] = []
    obj = decoder(trim(raw) if meta is Meta.LEAN else raw, None, problems)
    if meta is not Meta.ALL and obj.meta.extra:
        obj = replace(obj, meta=replace(obj.meta, extra={}))  # type: ignore[type-var]
    return obj, tuple(problems)


def split(problems: Iterable[Problem]) -> tuple[list[Problem], list[Problem]]:
    """Errors and the rest (warnings), each in the order found."""
    errors: list[Problem] = []
    warnings: list[Problem] = []
    for p in problems:
        (errors if p.severity is Severity.ERROR else warnings).append(p)
    return errors, warnings
