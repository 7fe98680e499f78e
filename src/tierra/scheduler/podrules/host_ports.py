"""NodePorts: a pod's host ports must be free on the node.

Two ports conflict when port and protocol are equal and the host IPs overlap: equal, or
either is ``0.0.0.0`` (every address; an empty ``hostIP`` means it). Only nodes already
holding host ports are looked at: the cost is the pods with host ports, not the nodes.
"""

from __future__ import annotations

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.podrules.state import NodeTable, PodIndex
from tierra.scheduler.podrules.verdict import Marker, Verdict

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"


def evaluate(pod: Pod, nodes: NodeTable, placed: PodIndex) -> Verdict | None:
    """None when the pod asks for no host port (the filter is skipped, as PreFilter's Skip)."""
    wanted = pod.rules.host_ports if pod.rules is not None else ()
    if not wanted:
        return None
    mark = Marker(NAME, len(nodes))
    at = nodes.position
    busy = [
        at[node]
        for node, used in placed.ports.items()
        if node in at and any(k != pod.key and w.conflicts(p) for k, p in used for w in wanted)
    ]
    if busy:
        mark.refuse(np.array(busy, dtype=np.int64), REASON)
    return mark.done()
