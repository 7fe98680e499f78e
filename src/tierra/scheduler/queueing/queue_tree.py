"""The queue hierarchy as Volcano's capacity plugin defines it, checked.

Every queue hangs under ``spec.parent``, or under the ``root`` queue when it names none;
``root`` always exists (a Queue object named ``root`` may give it a capability) and so
does ``default``. Only a queue without children (a leaf) takes pods. A child's
capability is bounded by every ancestor's, and its share of the cluster is cut from its
parent's (``shares.py``).

A tree that cannot be built is reported, each problem with its queue and field path
(``tierra validate`` prints them), and fails closed for the queues involved only:

* ``spec.parent`` naming a queue that does not exist, or the queue itself;
* a cycle of parents (each queue in it is reported);
* the ``root`` queue naming a parent.

Such queues, and every queue below them, are *broken*: their gangs wait with the reason
and their usage counts toward no ancestor. (Volcano stops scheduling everything when the
tree is wrong; one team's typo should not stall the others.)

Limits that ask for more than the tree can give are reported too, but scheduling goes
on with the tighter bound, so nothing is over-committed:

* a child's ``capability`` above its nearest ancestor's for that resource (the
  ancestor's applies);
* the children's ``guarantee`` (or ``deserved``) summed above their parent's, where the
  parent sets that resource (the parent's share is split, never exceeded);
* within one queue, ``guarantee`` or ``deserved`` above ``capability``, or ``guarantee``
  above ``deserved`` (Volcano's admission rule ``guarantee <= deserved <= capability``).

All amounts here are API milli-units, as ``Queue`` holds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from tierra.api.meta import ObjectMeta
from tierra.api.natural import natural_key
from tierra.api.podgroup import PodGroup
from tierra.api.quantity import format_milli
from tierra.api.queue import Queue
from tierra.errors import Problem
from tierra.scheduler.state.store import DEFAULT_QUEUE

ROOT = "root"


def _ref(name: str) -> str:
    return f"Queue/{name}"


def _sorted(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(names, key=natural_key))


@dataclass(frozen=True, slots=True)
class QueueTree:
    """Queues with their parents and children; ``broken`` ones hang nowhere."""

    queues: Mapping[str, Queue]  # every queue, ``root`` and ``default`` included
    parent: Mapping[str, str]  # every queue but ``root`` and the broken ones
    children: Mapping[str, tuple[str, ...]]  # natural order
    broken: Mapping[str, str]  # queue -> why its gangs cannot be scheduled
    order: tuple[str, ...]  # top-down (a parent before its children), broken ones left out
    problems: tuple[Problem, ...]

    @classmethod
    def build(cls, queues: Iterable[Queue]) -> QueueTree:
        by_name: dict[str, Queue] = {q.name: q for q in queues}
        by_name.setdefault(ROOT, Queue(meta=ObjectMeta(name=ROOT)))
        by_name.setdefault(DEFAULT_QUEUE, Queue(meta=ObjectMeta(name=DEFAULT_QUEUE)))
        problems: list[Problem] = []
        declared: dict[str, str] = {}
        broken: dict[str, str] = {}
        for name in _sorted(by_name):
            q = by_name[name]
            if name == ROOT:
                if q.parent:
                    problems.append(
                        Problem(
                            f"the root queue has no parent (got {q.parent!r}); ignored",
                            q.origin,
                            _ref(name),
                            "spec.parent",
                        )
                    )
                continue
            up = q.parent or ROOT
            if up == name:
                broken[name] = f"queue {name} names itself as its parent"
            elif up not in by_name:
                broken[name] = f"queue {name}'s parent queue {up!r} does not exist"
            else:
                declared[name] = up
        for name, why in broken.items():
            problems.append(Problem(why, by_name[name].origin, _ref(name), "spec.parent"))
        # cycles: follow parents from each queue; a walk that comes back to itself
        on_cycle: dict[str, str] = {}
        for start in _sorted(declared):
            seen: list[str] = []
            at: str | None = start
            while at is not None and at != ROOT and at not in seen and at not in broken:
                seen.append(at)
                at = declared.get(at)
            if at is not None and at in seen and start not in on_cycle:
                loop = seen[seen.index(at) :]
                text = " -> ".join([*loop, loop[0]])
                for member in loop:
                    on_cycle.setdefault(member, f"queue cycle {text}")
        for name in _sorted(on_cycle):
            why = on_cycle[name]
            broken[name] = why
            problems.append(Problem(why, by_name[name].origin, _ref(name), "spec.parent"))
        # everything below a broken queue is broken too (reported once, at the cause)
        changed = True
        while changed:
            changed = False
            for name, up in declared.items():
                if name not in broken and up in broken:
                    broken[name] = f"its ancestor queue {up}: {broken[up]}"
                    changed = True
        parent = {n: up for n, up in declared.items() if n not in broken}
        kids: dict[str, list[str]] = {}
        for n, up in parent.items():
            kids.setdefault(up, []).append(n)
        children = {n: _sorted(c) for n, c in kids.items()}
        order: list[str] = []
        frontier = [ROOT]
        while frontier:
            order.extend(frontier)
            frontier = [c for n in frontier for c in children.get(n, ())]
        tree = cls(
            queues=by_name,
            parent=parent,
            children=children,
            broken=broken,
            order=tuple(order),
            problems=(),
        )
        return replace(tree, problems=(*problems, *tree._limit_problems()))

    # -- shape ------------------------------------------------------------------------

    def is_leaf(self, name: str) -> bool:
        return not self.children.get(name)

    def ancestors(self, name: str) -> tuple[str, ...]:
        """The queue's parent, its parent's parent, ... up to ``root`` (empty for root)."""
        out: list[str] = []
        at = self.parent.get(name)
        while at is not None:
            out.append(at)
            at = self.parent.get(at)
        return tuple(out)

    def path(self, name: str) -> tuple[str, ...]:
        """From the root's child down to ``name`` (empty for root)."""
        if name == ROOT:
            return ()
        return (*reversed(self.ancestors(name)[:-1]), name)

    def subtree(self, name: str) -> tuple[str, ...]:
        """``name`` and every queue below it, top-down."""
        out = [name]
        i = 0
        while i < len(out):
            out.extend(self.children.get(out[i], ()))
            i += 1
        return tuple(out)

    def leaf_problem(self, name: str) -> str | None:
        """Why a gang in queue ``name`` cannot be scheduled there, or None."""
        if name not in self.queues:
            return f"queue {name!r} does not exist"
        if name in self.broken:
            return self.broken[name]
        kids = self.children.get(name)
        if kids:
            shown = ", ".join(kids[:3]) + (", ..." if len(kids) > 3 else "")
            return f"queue {name} has child queues ({shown}); only leaf queues take pods"
        for up in self.ancestors(name):
            state = self.queues[up].state
            if state not in ("Open", ""):  # closing a parent closes its children (Volcano)
                return f"queue {name}'s ancestor queue {up} is {state}"
        return None

    def capability(self, name: str) -> dict[str, int]:
        """The tightest capability over ``name`` and its ancestors, per resource named."""
        out: dict[str, int] = {}
        for q in (name, *self.ancestors(name)):
            for r, v in self.queues[q].capability.items():
                out[r] = min(v, out.get(r, v))
        return out

    # -- limits the tree cannot give ----------------------------------------------------

    def _limit_problems(self) -> list[Problem]:
        out: list[Problem] = []
        for name in self.order:
            q = self.queues[name]
            out.extend(_own_limit_problems(q))
            up = self.parent.get(name)
            if up is not None:
                for r, v in sorted(q.capability.items()):
                    bound = self._nearest_capability(up, r)
                    if bound is not None and v > bound[1]:
                        out.append(
                            Problem(
                                f"{format_milli(v, r)} exceeds ancestor queue {bound[0]}'s "
                                f"capability {format_milli(bound[1], r)} (that one applies)",
                                q.origin,
                                _ref(name),
                                f"spec.capability.{r}",
                            )
                        )
            kids = self.children.get(name, ())
            if kids:
                out.extend(self._sum_problems(q, kids))
        return out

    def _nearest_capability(self, name: str, resource: str) -> tuple[str, int] | None:
        for q in (name, *self.ancestors(name)):
            v = self.queues[q].capability.get(resource)
            if v is not None:
                return q, v
        return None

    def _sum_problems(self, q: Queue, kids: tuple[str, ...]) -> list[Problem]:
        out: list[Problem] = []
        for what, path, own in (
            ("guarantee", "spec.guarantee.resource", q.guarantee),
            ("deserved", "spec.deserved", q.deserved),
        ):
            for r, limit in sorted(own.items()):
                asked = {
                    k: amounts[r]
                    for k in kids
                    if r in (amounts := self._field(k, what)) and amounts[r] > 0
                }
                total = sum(asked.values())
                if total > limit:
                    shown = ", ".join(f"{k} {format_milli(v, r)}" for k, v in asked.items())
                    out.append(
                        Problem(
                            f"child queues ask for {format_milli(total, r)} {r} in total "
                            f"({shown}), more than this queue's {what} "
                            f"{format_milli(limit, r)}; they share it instead",
                            q.origin,
                            _ref(q.name),
                            f"{path}.{r}",
                        )
                    )
        return out

    def _field(self, name: str, what: str) -> Mapping[str, int]:
        q = self.queues[name]
        return q.guarantee if what == "guarantee" else q.deserved


def _own_limit_problems(q: Queue) -> list[Problem]:
    """Volcano's admission rule inside one queue: guarantee <= deserved <= capability."""
    out: list[Problem] = []
    for r, g in sorted(q.guarantee.items()):
        cap = q.capability.get(r)
        if cap is not None and g > cap:
            out.append(
                Problem(
                    f"guarantee {format_milli(g, r)} is above capability {format_milli(cap, r)}",
                    q.origin,
                    _ref(q.name),
                    f"spec.guarantee.resource.{r}",
                )
            )
        d = q.deserved.get(r)
        if d is not None and g > d:
            out.append(
                Problem(
                    f"deserved {format_milli(d, r)} is below guarantee {format_milli(g, r)}",
                    q.origin,
                    _ref(q.name),
                    f"spec.deserved.{r}",
                )
            )
    for r, d in sorted(q.deserved.items()):
        cap = q.capability.get(r)
        if cap is not None and d > cap:
            out.append(
                Problem(
                    f"deserved {format_milli(d, r)} is above capability {format_milli(cap, r)}",
                    q.origin,
                    _ref(q.name),
                    f"spec.deserved.{r}",
                )
            )
    return out


def podgroup_queue_problems(podgroups: Iterable[PodGroup], tree: QueueTree) -> list[Problem]:
    """PodGroups naming a queue with children (only leaves take pods)."""
    out: list[Problem] = []
    for pg in podgroups:
        if pg.queue in tree.children:
            why = tree.leaf_problem(pg.queue)
            assert why is not None
            out.append(Problem(why, pg.origin, f"PodGroup/{pg.key}", "spec.queue"))
    return out
