"""User regexes, compiled with RE2 so a hostile pattern cannot hang the scheduler.

Python's ``re`` backtracks: ``(a+)+$`` against a long name takes exponential time. RE2
runs in time linear in the input, which is what Volcano (Go's regexp) gives too, and it
speaks the same syntax. Compile errors are returned as text, never logged to stderr.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 64 << 20  # bound the automaton; pathological patterns fail to compile


class Pattern(Protocol):
    def search(self, text: str) -> Any: ...


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Pattern | str:
    """A compiled pattern, or the reason it does not compile."""
    try:
        compiled: Pattern = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"does not compile as an RE2 regular expression: {detail}"
    except (TypeError, ValueError) as exc:
        return f"does not compile as an RE2 regular expression: {exc}"
    return compiled
