"""The error tree, and the one shape every complaint about user input takes.

Why one shape: a platform engineer reading ``tierra validate`` output, a webhook
rejection or a scheduler event should see the same thing: which file, which document,
which object, which field, and what was expected. ``Problem`` is that record.

Tree::

    TierraError                  root; never raised for a placement outcome
    ├── InputError               the input could not be read at all (exit status 2)
    └── ConfigError              a configuration file is wrong (exit status 2)

Placement outcomes ("this gang does not fit") are values, never exceptions.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Severity(enum.StrEnum):
    """``error`` makes ``tierra validate`` exit 1; ``warning`` is printed but tolerated."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an object came from: a file and its 1-based document number."""

    file: str
    document: int
    item: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}: document {self.document}"
        return where if self.item is None else f"{where}, items[{self.item}]"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input, located as precisely as we can.

    ``obj`` is ``Kind/name`` or ``Kind/namespace/name``; ``path`` is a Kubernetes field
    path such as ``spec.members[2].selector.regexMatch.pattern``. ``group`` is the
    object's API group where its kind lives in two that are two name spaces (a
    HyperNode's: ``topology.tierra.dev`` or ``topology.volcano.sh``), so a problem of one
    ``HyperNode/rack-a`` is never held against the other group's.
    """

    message: str
    origin: Origin | None = None
    obj: str = ""
    path: str = ""
    severity: Severity = Severity.ERROR
    group: str = ""

    def __str__(self) -> str:
        parts = [str(self.origin)] if self.origin else []
        if self.obj:
            parts.append(self.obj)
        if self.path:
            parts.append(self.path)
        parts.append(self.message)
        return ": ".join(parts)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"severity": str(self.severity), "message": self.message}
        if self.origin:
            out["file"] = self.origin.file
            out["document"] = self.origin.document
        if self.obj:
            out["object"] = self.obj
        if self.group:
            out["group"] = self.group
        if self.path:
            out["field"] = self.path
        return out


class TierraError(Exception):
    """Root of every error tierra raises on purpose."""


class InputError(TierraError):
    """The input could not be read; carries every problem found, not just the first."""

    def __init__(self, problems: Sequence[Problem] | Problem | str) -> None:
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ConfigError(TierraError):
    """A configuration file (scheduler profile, cost model, workload) is wrong."""


def errors_only(problems: Iterable[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity is Severity.ERROR]
