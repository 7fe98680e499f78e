"""Label selectors with Kubernetes' semantics (matchLabels, matchExpressions).

Used by HyperNode ``labelMatch`` members, PodGroup sub-group policies and node
affinity. One rule differs by caller and is therefore a parameter, not a guess:
Volcano's HyperNode ``labelMatch`` treats an *empty* selector as matching nothing,
while a Kubernetes ``LabelSelector`` elsewhere matches everything.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tierra.api.fields import Fields


class Operator(enum.StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


SELECTOR_OPERATORS = (Operator.IN, Operator.NOT_IN, Operator.EXISTS, Operator.DOES_NOT_EXIST)
NODE_SELECTOR_OPERATORS = (*SELECTOR_OPERATORS, Operator.GT, Operator.LT)


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op is Operator.IN:
            return value is not None and value in self.values
        if op is Operator.NOT_IN:
            return value is None or value not in self.values
        if op is Operator.EXISTS:
            return value is not None
        if op is Operator.DOES_NOT_EXIST:
            return value is None
        # Gt / Lt compare integers; a non-integer label value never matches (as in Kubernetes).
        if value is None or not self.values:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if op is Operator.GT else have < want

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": str(self.operator)}
        if self.values or self.operator in (Operator.IN, Operator.NOT_IN):
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class LabelSelector:
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __hash__(self) -> int:  # match_labels is a dict: hash its items (pod rules key on it)
        return hash((tuple(sorted(self.match_labels.items())), self.match_expressions))

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str], *, empty_matches: bool = True) -> bool:
        if self.empty:
            return empty_matches
        for key, want in self.match_labels.items():
            if labels.get(key) != want:
                return False
        return all(r.matches(labels) for r in self.match_expressions)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [r.to_dict() for r in self.match_expressions]
        return out


def decode_requirement(f: Fields, allowed: tuple[Operator, ...]) -> Requirement | None:
    key = f.string("key", required=True)
    op_text = f.string("operator", required=True)
    values = tuple(f.str_list("values"))
    try:
        op = Operator(op_text)
    except ValueError:
        op = None
    if op is None or op not in allowed:
        f.problem("operator", f"must be one of {', '.join(allowed)}; got {op_text!r}")
        return None
    if op in (Operator.IN, Operator.NOT_IN) and not values:
        f.problem("values", f"must not be empty for operator {op}")
        return None
    if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        f.problem("values", f"must be empty for operator {op}")
        return None
    if op in (Operator.GT, Operator.LT):
        if len(values) != 1:
            f.problem("values", f"must hold exactly one integer for operator {op}")
            return None
        try:
            int(values[0])
        except ValueError:
            f.problem("values", f"must hold an integer for operator {op}, got {values[0]!r}")
            return None
    if not key:
        return None
    return Requirement(key, op, values)


def decode_label_selector(f: Fields) -> LabelSelector:
    exprs = [decode_requirement(e, SELECTOR_OPERATORS) for e in f.objects("matchExpressions")]
    return LabelSelector(
        match_labels=f.str_map("matchLabels"),
        match_expressions=tuple(r for r in exprs if r is not None),
    )
