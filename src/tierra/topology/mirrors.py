"""One topology when tierra's controller writes it into both API groups.

The controller (``groups: [tierra, volcano]``) writes every HyperNode a source finds
into each group it is told to, with the same name and the same managed-by label
(``MANAGED_BY``: the source's owner) on both copies, so that Volcano's scheduler reads
the Volcano copy and tierra reads its own. Both copies describe one tree; counted twice
they would be two trees over the same nodes, and every tier-named constraint would
see each domain twice.

A Volcano-group HyperNode is a *mirror* when tierra's group holds a HyperNode of the
same name carrying the same managed-by value. tierra schedules by its own group's copy
and sets the mirror aside: tierra's copy carries ``spec.link`` and the health status
(``status.unhealthyNodes``, conditions) as fields, where the Volcano copy has the link
only in an annotation and health only when the controller's status groups include
Volcano's; and it is the copy the controller writes first (its primary group by
default). A copy is recognised by the label alone, not by comparing specs: while the
controller is between its two writes the copies differ for a moment, and tierra's is
the newer intent either way.

Everything else is kept: a same-name pair without a common managed-by value (made by
hand, or by two owners) is two HyperNodes, each in its own name space.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tierra.api.hypernode import MANAGED_BY, TIERRA_GROUP, VOLCANO_GROUP, HyperNode

SCHEDULED_BY = TIERRA_GROUP
"""The group whose copy tierra schedules by when both groups hold the controller's."""
MIRROR_GROUP = VOLCANO_GROUP


@dataclass(frozen=True, slots=True)
class Mirrors:
    """The Volcano copies set aside, sorted by name; each has a tierra twin."""

    copies: tuple[HyperNode, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.copies)

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(sorted({h.meta.labels.get(MANAGED_BY, "") for h in self.copies}))

    def note(self, doing: str = "scheduling by") -> str:
        """One line for a log, stderr or the dashboard: what was set aside and why
        (``doing``: what is done with tierra's copies, ``writing`` for an export)."""
        n = len(self.copies)
        owners = ", ".join(repr(o) for o in self.owners)
        return (
            f"{n} {MIRROR_GROUP} HyperNode{'' if n == 1 else 's'} mirror{'s' if n == 1 else ''} "
            f"{SCHEDULED_BY}'s (managed by {owners} in both groups): {doing} "
            f"{SCHEDULED_BY}, whose copies carry link and health"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "group": MIRROR_GROUP,
            "scheduledBy": SCHEDULED_BY,
            "managedBy": list(self.owners),
            "hyperNodes": [h.name for h in self.copies],
        }


def is_mirror(copy: HyperNode, twin: HyperNode | None) -> bool:
    """Whether ``copy`` (Volcano's group) is the controller's mirror of ``twin`` (tierra's)."""
    if copy.group != MIRROR_GROUP or twin is None or twin.group != SCHEDULED_BY:
        return False
    owner = copy.meta.labels.get(MANAGED_BY)
    return bool(owner) and twin.meta.labels.get(MANAGED_BY) == owner and twin.name == copy.name


def split_mirrors(hypernodes: Iterable[HyperNode]) -> tuple[list[HyperNode], Mirrors]:
    """The HyperNodes to schedule by (order kept) and the mirrors set aside."""
    hns: Sequence[HyperNode] = list(hypernodes)
    ours = {h.name: h for h in hns if h.group == SCHEDULED_BY}
    kept: list[HyperNode] = []
    copies: list[HyperNode] = []
    for h in hns:
        (copies if is_mirror(h, ours.get(h.name)) else kept).append(h)
    return kept, Mirrors(tuple(sorted(copies, key=lambda h: h.name)))
