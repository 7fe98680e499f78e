"""Why no node can serve a pod's claims, told from the node that came closest.

The first refusal met is some node's, often one with nothing to offer. A person wants
the best there is: the node holding most of the devices asked for (the matrix counts
them, ``Counted.found``), and among the few that hold most, the one where most of the
pod's claims can be allocated together, in the pod's order ("node-7 comes closest: 3 of
the pod's 4 claims"). Its refusal is the reason given. Only a handful of nodes are
searched, and only when no node at all can serve the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.resource import ResourceClaim
from tierra.scheduler.devices.matrix import Counted, DeviceMatrix
from tierra.scheduler.devices.pools import DeviceId, NodeInfo
from tierra.scheduler.devices.refusal import DeviceRefusal

if TYPE_CHECKING:
    from tierra.scheduler.devices.cluster import DeviceCluster

SEARCHED = 8  # nodes searched for the closest, those holding most of the devices first


def closest_refusal(
    devices: DeviceCluster,
    pod: Pod,
    claims: Sequence[ResourceClaim],
    candidates: Sequence[Node],
    counted: tuple[DeviceMatrix, Counted] | None,
) -> DeviceRefusal | None:
    """The refusal of the node that came closest, saying so (None: no candidate)."""
    if not candidates:
        return None
    order = list(candidates)
    if counted is not None:
        matrix, verdict = counted

        def found(node: Node) -> int:
            i = matrix.node_ix.get(node.name)
            return -1 if i is None else int(verdict.found[i])

        order.sort(key=found, reverse=True)  # stable: node order among equals
    todo = [c for c in claims if devices.allocation_of(c.key) is None]
    best: tuple[int, Node, DeviceRefusal] | None = None
    for node in order[:SEARCHED]:
        done, refusal = _progress(devices, pod, todo, node)
        if refusal is not None and (best is None or done > best[0]):
            best = (done, node, refusal)
    if best is None:
        return None
    done, node, refusal = best
    note = f"{node.name} comes closest"
    if len(todo) > 1:
        note += f": {done} of the pod's {len(todo)} claims"
    return replace(refusal, closest=note)


def _progress(
    devices: DeviceCluster, pod: Pod, todo: Sequence[ResourceClaim], node: Node
) -> tuple[int, DeviceRefusal | None]:
    """How many of ``todo`` can be allocated on ``node`` together, in order, and the
    refusal of the first that cannot (None: the pod fits there after all)."""
    whole = devices.plan(pod, node)
    if not isinstance(whole, DeviceRefusal):
        return len(todo), None
    if len(todo) < 2 or whole.claim not in {c.ref for c in todo}:
        return 0, whole  # one claim, or an allocated claim pins the pod elsewhere
    info = NodeInfo(node.name, node.labels)
    base = devices.in_use()
    taken: set[DeviceId] = set()
    for j, claim in enumerate(todo):
        together = devices.allocator.allocate(todo[: j + 1], info, base)
        if isinstance(together, DeviceRefusal):
            # told with the claims before it holding their devices: its own reason
            alone = devices.allocator.allocate([claim], info, base | taken)
            return j, alone if isinstance(alone, DeviceRefusal) else together
        taken = {r.device_id for a in together for r in a.allocation.results}
    return len(todo), whole
