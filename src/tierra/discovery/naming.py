"""Deterministic, readable HyperNode names that Kubernetes accepts.

Volcano's discoverers append five random characters to every generated name, so a
rerun or a second controller replica renames everything and the reconciler churns.
tierra derives each name from what the source calls the thing (a switch, a label
value path, a Slurm block), cleaned into a DNS subdomain: the same input always gives
the same name, and a person can read it. Two different identities that clean to the
same text (``Rack_1`` and ``rack-1``) both get a short hash of their identity appended,
so the clash is resolved the same way on every run and never by input order.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Hashable, Mapping
from typing import TypeVar

# A HyperNode is named by its parent's exactMatch, which Volcano's admission policy
# requires to be a qualified name: a DNS subdomain of at most 63 characters.
MAX_NAME = 63
_INVALID = re.compile(r"[^a-z0-9.-]+")
_DASHES = re.compile(r"-{2,}")
_DOTS = re.compile(r"[-.]*\.[-.]*")

K = TypeVar("K", bound=Hashable)


def short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def clean(text: str) -> str:
    """``text`` lower-cased with every run of other characters turned into one ``-``.

    Dots survive (they separate DNS labels) but never next to a dash or each other,
    and the result starts and ends with a letter or digit; empty input gives ``x``.
    """
    out = _INVALID.sub("-", text.strip().lower())
    out = _DOTS.sub(".", _DASHES.sub("-", out)).strip("-.")
    return out or "x"


def fit(name: str, limit: int = MAX_NAME) -> str:
    """``name`` if it is short enough, else a prefix plus a hash of the whole of it."""
    if len(name) <= limit:
        return name
    digest = short_hash(name, 12)
    return f"{name[: limit - len(digest) - 1].rstrip('-.')}-{digest}"


def join(*parts: str) -> str:
    """One name from several parts: ``join("ib", "t2", "CSPINE1-01")`` -> ``ib-t2-cspine1-01``."""
    return fit("-".join(clean(p) for p in parts if p))


def label_value(text: str) -> str:
    """A valid label value (<= 63 characters, alphanumeric ends) standing for ``text``."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if len(value) > 63:
        digest = short_hash(text, 12)
        value = f"{value[: 63 - len(digest) - 1].rstrip('-._')}-{digest}"
    return value or "x"


def unique_names(proposed: Mapping[K, str]) -> dict[K, str]:
    """Resolve clashes: identities proposing the same name all get an identity hash.

    Only the clashing identities change, and each one's new name depends on its own
    identity alone, so adding an unrelated object never renames another.
    """
    by_name: dict[str, list[K]] = defaultdict(list)
    for key, name in proposed.items():
        by_name[name].append(key)
    out: dict[K, str] = {}
    for name, keys in by_name.items():
        if len(keys) == 1:
            out[keys[0]] = name
            continue
        for key in keys:
            out[key] = fit(f"{name[: MAX_NAME - 9].rstrip('-.')}-{short_hash(repr(key))}")
    return out
