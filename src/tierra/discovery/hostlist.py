"""Slurm hostlist expressions: ``gpu[001-064,100]`` <-> the names they stand for.

Slurm writes node sets compactly (``Nodes=tux[0-3],login1``, several bracket groups
multiply out: ``r[1-2]n[1-2]`` is four names). Expansion keeps zero padding (the width
is that of the range's first number, as Slurm does); compression groups names by prefix,
suffix and digit count, so ``compress(expand(x))`` lists exactly the same names.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from collections.abc import Iterable

from tierra.api.natural import natural_key

MAX_EXPANSION = 1_000_000
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


class HostlistError(ValueError):
    """The expression is malformed; the message says where."""


def _split_top(expr: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' at character {i + 1} of {expr!r}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unmatched ']' at character {i + 1} of {expr!r}")
        elif ch == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unclosed '[' in {expr!r}")
    items.append(expr[start:])
    return items


def _ranges(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise HostlistError(f"{part!r} in {expr!r} is not a number or a range like 1-8")
        lo_text, hi_text = m.group(1), m.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise HostlistError(f"range {part!r} in {expr!r} runs backwards")
        if hi - lo >= MAX_EXPANSION:
            raise HostlistError(f"range {part!r} in {expr!r} is too large")
        width = len(lo_text)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def expand(expr: str) -> list[str]:
    """Every name in ``expr``, in the order written (duplicates kept once)."""
    names: dict[str, None] = {}
    for raw in _split_top(expr.strip()):
        item = raw.strip()
        if not item:
            continue
        pieces = re.split(r"(\[[^\]]*\])", item)
        choices: list[list[str]] = []
        for piece in pieces:
            if piece.startswith("["):
                choices.append(_ranges(piece[1:-1], expr))
            elif piece:
                if any(c in piece for c in "[] "):
                    raise HostlistError(f"unexpected character in {item!r} of {expr!r}")
                choices.append([piece])
        for combo in itertools.product(*choices):
            names["".join(combo)] = None
            if len(names) > MAX_EXPANSION:
                raise HostlistError(f"{expr!r} expands to too many names")
    return list(names)


def compress(names: Iterable[str]) -> str:
    """A compact hostlist for ``names`` (each listed once, in natural order).

    Unpadded numbers (``n8``, ``n10``) share one bracket whatever their length;
    zero-padded ones (``n008``) only with numbers of the same width, so that expanding
    the result (which pads to the width of each range's first number) gives them back.
    """
    groups: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    for name in set(names):
        m = _TRAILING_NUMBER.match(name)
        if not m or "[" in name or "," in name:
            plain.append(name)
            continue
        prefix, digits, suffix = m.groups()
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups[(prefix, suffix, width)].append(int(digits))
    parts: list[tuple[tuple[str | int, ...], str]] = [(natural_key(n), n) for n in plain]
    for (prefix, suffix, width), numbers in groups.items():
        numbers.sort()

        def fmt(n: int, width: int = width) -> str:
            return str(n).zfill(width)

        first = f"{prefix}{fmt(numbers[0])}{suffix}"
        if len(numbers) == 1:
            parts.append((natural_key(first), first))
            continue
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(fmt(start) if start == prev else f"{fmt(start)}-{fmt(prev)}")
            if n is not None:
                start = prev = n
        parts.append((natural_key(first), f"{prefix}[{','.join(runs)}]{suffix}"))
    return ",".join(text for _, text in sorted(parts))
