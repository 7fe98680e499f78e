"""First fit: pods fill nodes in name order, each node as full as it goes.

The simplest packer. It is topology-blind, but node names often follow the racks
(``gpu-t0003-h5``), so on such clusters it gets some locality by accident, and none on
the cloud preset, whose EC2 names are unordered: an honest picture of both cases.
"""

from __future__ import annotations

import numpy as np

from tierra.sim.policies.base import Gang, LedgerPolicy

NAME = "firstfit"
DESCRIPTION = "topology-oblivious: fill nodes in name order"


class FirstFitPolicy(LedgerPolicy):
    name = NAME

    def prepare(self) -> None:
        self._order = np.arange(len(self.index.node_names), dtype=np.int64)

    def place(self, gang: Gang) -> list[int] | None:
        return self.fill_roles(gang, self._order[self.healthy[self._order]])
