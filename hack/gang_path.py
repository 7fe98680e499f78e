"""How many times one gang's trip through the scheduler crosses into another file.

Runs one session over Volcano's canonical tree with one 4-pod gang (hard tier 2) and
counts, from ``_Session.place`` to its commit, every call from a function of one
``tierra`` file into another, how many of them enter a file entered before, and per file
how often it is entered (``python hack/gang_path.py``; issue 19's measure).

The same crossings are then told by what they are, so the count can be read: asking a
constraint (one module per constraint, each asked at its hooks: ``constraints/``,
``podrules/``, ``devices/``, ``scoring/``), reading an API object (``api/``), an array
helper shared with the simulator and the CLI (``topology/``, ``state/layout.py``), and
the rest, the path itself (session, plan, allocate, search, distribution, the queue
book, the store). ``--list`` prints every crossing in order.
"""

from __future__ import annotations

import sys
from collections import Counter
from types import FrameType
from typing import Any

import tierra.scheduler.session as session_module
from tierra.scheduler import ClusterStore
from tierra.scheduler.testing import canonical, gang, snapshot, topology


def _short(path: str) -> str | None:
    i = path.find("/tierra/")
    return path[i + 8 :] if i >= 0 and "testing.py" not in path else None


KINDS = (  # (kind, path prefixes), first match wins
    (
        "asking a constraint",
        (
            "scheduler/constraints/",
            "scheduler/podrules/",
            "scheduler/devices/",
            "scheduler/scoring/",
        ),
    ),
    ("reading an API object", ("api/",)),
    ("an array helper", ("topology/", "scheduler/state/layout.py")),
)
PATH = "the path itself"


def kind_of(callee: str) -> str:
    for kind, prefixes in KINDS:
        if callee.startswith(prefixes) and not callee.endswith("constraints/registry.py"):
            return kind
    return PATH


class Crossings:
    def __init__(self) -> None:
        self.calls = 0
        self.again = 0
        self.seen: set[str] = set()
        self.stack: list[str] = []
        self.entered: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.again_by_kind: Counter[str] = Counter()
        self.order: list[str] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        here = _short(frame.f_code.co_filename)
        if here is None:
            return
        if event == "return":
            self.stack.pop()
            return
        caller = self.stack[-1] if self.stack else None
        self.stack.append(here)
        if caller is not None and caller != here:
            self.calls += 1
            self.entered[here] += 1
            self.again += here in self.seen
            kind = kind_of(here)
            self.kinds[kind] += 1
            self.again_by_kind[kind] += here in self.seen
            self.order.append(f"{caller} -> {here}:{frame.f_code.co_name}")
        self.seen.add(here)


def main() -> None:
    nodes, hns = canonical()
    pg, pods = gang("job", 4, network_topology=topology(tier=2), gpu=8)
    store = ClusterStore.from_snapshot(snapshot(nodes, hns, pods, [pg]))
    seen = Crossings()
    place = session_module._Session.place

    def traced(self: Any, *args: Any) -> Any:
        sys.setprofile(seen)
        try:
            return place(self, *args)
        finally:
            sys.setprofile(None)

    session_module._Session.place = traced  # type: ignore[method-assign]
    result = session_module.run_session(store)
    print(f"bound {len(result.bindings)} pods")
    print(f"{seen.calls} calls into another file, {seen.again} into one entered before, ")
    print(f"{len(seen.seen)} files")
    for path, n in seen.entered.most_common():
        print(f"  {n:3d} {path}")
    print("by what they are (calls, of them into a file entered before):")
    for kind in (PATH, *(k for k, _ in KINDS)):
        print(f"  {seen.kinds[kind]:3d} {seen.again_by_kind[kind]:3d}  {kind}")
    if "--list" in sys.argv:
        print("every crossing, in order:")
        for line in seen.order:
            print(f"  {line}")


if __name__ == "__main__":
    main()
