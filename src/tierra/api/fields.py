"""A path-tracking reader over decoded YAML/JSON, so every complaint names its field.

Decoders walk a manifest through ``Fields``; a wrong type or value records a
``Problem`` with the full field path (``spec.members[2].selector``) and returns a safe
default, so one bad field never hides the next one. Nothing here raises for user input.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any, TypeVar

from tierra.api.quantity import QuantityError, byte_counted, to_milli, too_large
from tierra.errors import Origin, Problem, Severity

T = TypeVar("T")

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
"""The largest int32, the type Kubernetes gives counts, tiers and priorities."""


class Report:
    """Collects problems for one object (origin and ``Kind/name`` filled in once)."""

    def __init__(
        self, origin: Origin | None, obj: str, sink: list[Problem], group: str = ""
    ) -> None:
        self.origin = origin
        self.obj = obj
        self.sink = sink
        self.group = group  # ``Problem.group``: a HyperNode's API group
        self.count = 0

    def add(self, path: str, message: str, severity: Severity = Severity.ERROR) -> None:
        if severity is Severity.ERROR:
            self.count += 1
        self.sink.append(Problem(message, self.origin, self.obj, path, severity, self.group))


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


class Fields:
    """A view of one mapping at ``path``; accessors validate and record problems."""

    __slots__ = ("data", "path", "report")

    def __init__(self, data: Mapping[str, Any], path: str, report: Report) -> None:
        self.data = data
        self.path = path
        self.report = report

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def problem(self, key: str, message: str) -> None:
        self.report.add(self.at(key) if key else self.path, message)

    def obj(self, key: str, *, required: bool = False) -> Fields:
        value = self.data.get(key)
        if value is None:
            if required:
                self.problem(key, "is required")
            return Fields({}, self.at(key), self.report)
        if type(value) is not dict and not isinstance(value, Mapping):  # dict: the fast way
            self.problem(key, f"expected an object, got {_type_name(value)}")
            return Fields({}, self.at(key), self.report)
        return Fields(value, self.at(key), self.report)

    def objects(self, key: str, *, required: bool = False) -> list[Fields]:
        value = self.data.get(key)
        if value is None:
            if required:
                self.problem(key, "is required")
            return []
        if not isinstance(value, list):
            self.problem(key, f"expected a list, got {_type_name(value)}")
            return []
        out: list[Fields] = []
        for i, item in enumerate(value):
            path = f"{self.at(key)}[{i}]"
            if type(item) is not dict and not isinstance(item, Mapping):
                self.report.add(path, f"expected an object, got {_type_name(item)}")
                continue
            out.append(Fields(item, path, self.report))
        return out

    def string(self, key: str, default: str = "", *, required: bool = False) -> str:
        value = self.data.get(key)
        if value is None:
            if required:
                self.problem(key, "is required")
            return default
        if not isinstance(value, str):
            self.problem(key, f"expected a string, got {_type_name(value)}")
            return default
        return value

    def opt_str(self, key: str) -> str | None:
        if self.data.get(key) is None:
            return None
        return self.string(key)

    def integer(
        self,
        key: str,
        default: int = 0,
        *,
        required: bool = False,
        minimum: int | None = None,
        maximum: int | None = INT32_MAX,
    ) -> int:
        """An integer field; at most ``maximum`` (int32 by default: every count and tier in
        these APIs is an int32, and a bigger one is refused by the API server)."""
        value = self.data.get(key)
        if value is None:
            if required:
                self.problem(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"expected an integer, got {_type_name(value)} {value!r}")
            return default
        if minimum is not None and value < minimum:
            self.problem(key, f"must be >= {minimum}, got {value}")
            return default
        if maximum is not None and value > maximum:
            self.problem(key, f"must be <= {maximum}, got {value}")
            return default
        return value

    def opt_int(self, key: str, *, minimum: int | None = None) -> int | None:
        if self.data.get(key) is None:
            return None
        sentinel = -(2**63)
        value = self.integer(key, sentinel, minimum=minimum)
        return None if value == sentinel else value

    def number(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(key, f"expected a number, got {_type_name(value)} {value!r}")
            return None
        return float(value)

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problem(key, f"expected true or false, got {value!r}")
            return default
        return value

    def str_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(key, f"expected an object of strings, got {_type_name(value)}")
            return {}
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, bool) or v is None:
                self.report.add(f"{self.at(key)}.{k}", f"expected a string, got {v!r}")
                continue
            out[str(k)] = v if isinstance(v, str) else str(v)
        return out

    def str_list(self, key: str) -> list[str]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(key, f"expected a list of strings, got {_type_name(value)}")
            return []
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.report.add(f"{self.at(key)}[{i}]", f"expected a string, got {item!r}")
                continue
            out.append(item)
        return out

    def resources(self, key: str) -> dict[str, int]:
        """A ResourceList (``{cpu: 500m, memory: 16Gi}``) in milli-units."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.problem(key, f"expected a resource list, got {_type_name(value)}")
            return {}
        try:
            known = _valid_resources(tuple(value.items()))
        except TypeError:  # an unhashable amount (a list, an object): reported below
            known = None
        if known is not None:
            return dict(known)
        out: dict[str, int] = {}
        for name, qty in value.items():
            try:
                milli = to_milli(qty)
            except QuantityError as exc:
                self.report.add(f"{self.at(key)}.{name}", str(exc))
                continue
            if milli < 0:
                self.report.add(f"{self.at(key)}.{name}", f"must not be negative, got {qty!r}")
                continue
            if too_large(str(name), milli):
                self.report.add(
                    f"{self.at(key)}.{name}",
                    f"{qty!r} is larger than tierra can count (at most 2^46 "
                    f"{'bytes' if byte_counted(str(name)) else 'milli-units'} per object)",
                )
                continue
            out[str(name)] = milli
        return out

    def enum(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.string(key, default)
        if value not in allowed:
            self.problem(key, f"must be one of {', '.join(allowed)}; got {value!r}")
            return default
        return value


@lru_cache(maxsize=4096)
def _valid_resources(items: tuple[tuple[Any, Any], ...]) -> dict[str, int] | None:
    """A ResourceList with nothing to report, in milli-units; None when something is
    wrong (``Fields.resources`` then says what). Remembered: a cluster's pods repeat a
    few requests and its nodes a few shapes, a hundred thousand times over."""
    out: dict[str, int] = {}
    for name, qty in items:
        try:
            milli = to_milli(qty)
        except QuantityError:
            return None
        if milli < 0 or too_large(str(name), milli):
            return None
        out[str(name)] = milli
    return out
