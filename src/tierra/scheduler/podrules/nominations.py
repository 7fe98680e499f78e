"""The pending pods nominated to a node (``status.nominatedNodeName``), followed as the
store's pods change; what they hold is ``nominated.py``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tierra.api.pod import Pod

if TYPE_CHECKING:
    from tierra.scheduler.state.store import ClusterStore


@dataclass(frozen=True, slots=True)
class Hold:
    """A nominated pending pod: its node, and who may not take its room."""

    node: str
    priority: int
    gang: str  # its gang's key (its own key when alone)
    scheduler: str


def nominated_node(pod: Pod) -> str:
    return pod.rules.nominated_node if pod.rules is not None else ""


class Nominations:
    """The holds of one store's nominated pending pods; the pod rules' book calls
    ``sync`` for every pod that changed (``RulesBook.pods_changed``)."""

    def __init__(self) -> None:
        self.holds: dict[str, Hold] = {}

    def copy(self) -> Nominations:
        """Holds of its own (``RulesBook.fork``)."""
        twin = Nominations()
        twin.holds = dict(self.holds)
        return twin

    def sync(self, store: ClusterStore, key: str) -> None:
        pod = store.pods.get(key)
        node = nominated_node(pod) if pod is not None else ""
        if pod is None or not node or key not in store.pending or pod.gated:
            if self.holds.pop(key, None) is not None and key not in store.node_of:
                # given up or gone, not placed: its room is free for the gangs it held
                # out, which must be tried again (bound, it holds the room itself)
                store.extension_changed()
            return
        self.holds[key] = Hold(
            node,
            pod.priority,
            store.gang_of.get(key) or key,
            pod.scheduler_name,
        )
