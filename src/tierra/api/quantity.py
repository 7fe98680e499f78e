"""Kubernetes resource quantities, parsed exactly.

Why exact: ``0.1`` cpu times ten must be exactly one cpu, and ``16Gi`` must be
17179869184 bytes, not a float near it. Quantities are parsed to ``Fraction`` and stored
as integer *milli-units* (as kube-scheduler does for cpu), rounding up like Kubernetes
does for sub-milli values, so every roll-up is integer arithmetic.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse ``500m``, ``16Gi``, ``1e3``, ``2`` (or a YAML number) exactly.

    >>> parse_quantity("500m")
    Fraction(1, 2)
    >>> parse_quantity("16Gi")
    Fraction(17179869184, 1)
    >>> parse_quantity("1e3")
    Fraction(1000, 1)
    """
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"expected a finite quantity, got {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"expected a quantity, got {type(value).__name__}")
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise QuantityError(f"{value!r} is not a quantity (examples: 500m, 4, 16Gi, 1e3)")
    number = Fraction(m["num"])
    if m["bin"]:
        return number * _BINARY[m["bin"]]
    if m["exp"]:
        exponent = int(m["exp"][1:])
        return number * (Fraction(10) ** exponent)
    return number * _DECIMAL[m["dec"] or ""]


def to_milli(value: str | int | float) -> int:
    """A quantity in integer milli-units, rounded up (``1n`` cpu costs ``1m``).

    Texts are remembered: a cluster repeats a few dozen (``8``, ``96``, ``1Ti``) across
    every node and pod, and exact parsing through ``Fraction`` is most of decoding a
    100,000-node snapshot otherwise."""
    if isinstance(value, str):
        return _text_milli(value)
    return math.ceil(parse_quantity(value) * 1000)


@lru_cache(maxsize=4096)
def _text_milli(value: str) -> int:
    return math.ceil(parse_quantity(value) * 1000)


def format_milli(milli: int, resource: str = "") -> str:
    """Render milli-units the way a person reads them: ``3500m`` -> ``3.5``, bytes -> ``Gi``."""
    if resource in ("memory", "ephemeral-storage") or resource.endswith("storage"):
        units = milli // 1000
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if units >= size:
                scaled = units / size
                return f"{scaled:.4g}{suffix}"
        return str(units)
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli / 1000:.4g}"


def milli_to_quantity(milli: int) -> str:
    """The exact quantity text for milli-units (``1500`` -> ``1500m``, ``2000`` -> ``2``)."""
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def byte_counted(name: str) -> bool:
    """Resources measured in bytes (memory, storage, huge pages)."""
    return (
        name in ("memory", "ephemeral-storage")
        or name.startswith("hugepages-")
        or name.endswith("storage")
    )


# The capacity ledger sums amounts over every node in int64. Bounding one amount at
# 2**46 ledger units (whole bytes for byte-counted resources, milli-units otherwise)
# keeps the sum over 100,000 nodes exact: 64 TiB of memory or 70 billion cpus per node.
MAX_LEDGER_UNITS = 2**46


def too_large(name: str, milli: int) -> bool:
    scale = 1000 if byte_counted(name) else 1
    return milli // scale > MAX_LEDGER_UNITS
