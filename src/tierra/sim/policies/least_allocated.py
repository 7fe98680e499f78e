"""Topology-oblivious spread: each pod to the least-allocated node, as kube-scheduler does.

Named ``spread`` on the command line (``tierra simulate --policies spread``); not to be
confused with ``tierra.scheduler.scoring.spread``, a scoring policy of tierra's own.

kube-scheduler's default scoring (NodeResourcesFit, LeastAllocated over cpu and memory)
sends each pod to the node with the most room left, ties to the first name. It knows
nothing of switches, so a gang lands wherever room is: the baseline every topology-aware
policy must beat. Pods of a gang are placed one by one, each seeing the previous ones.
"""

from __future__ import annotations

import numpy as np

from tierra.sim.policies.base import Gang, LedgerPolicy
from tierra.topology.arrays import fit_counts

NAME = "spread"
DESCRIPTION = "topology-oblivious: each pod to the least-allocated node (kube-scheduler default)"


class LeastAllocatedPolicy(LedgerPolicy):
    name = NAME

    def prepare(self) -> None:
        axis = self.capacity.axis
        self._scored = [axis.index["cpu"], axis.index["memory"]]
        alloc = self.capacity.node_alloc[:, self._scored].astype(np.float64)
        self._alloc = np.where(alloc > 0, alloc, 1.0)

    def place(self, gang: Gang) -> list[int] | None:
        free = self.free()
        out: list[int] = []
        for vec in gang.pod_vecs:
            ok = fit_counts(free, vec) > 0
            if not ok.any():
                return None
            left = (free[:, self._scored] - vec[self._scored]) / self._alloc
            score = np.where(ok, left.mean(axis=1), -np.inf)
            n = int(np.argmax(score))  # ties: the first node by name
            out.append(n)
            free[n] -= vec
        return out
