"""Capability accounting: a queue and every ancestor, pod by pod."""

from __future__ import annotations

import numpy as np

from tierra.scheduler.queue_tree import QueueTree
from tierra.scheduler.quota import UNLIMITED, Quota
from tierra.scheduler.testing import queue
from tierra.topology.capacity import ResourceAxis

GPU = "nvidia.com/gpu"


def test_room_is_the_tightest_headroom_up_the_tree() -> None:
    axis = ResourceAxis([GPU])
    g = axis.index[GPU]
    tree = QueueTree.build(
        [
            queue("org", capability={GPU: 8000}),
            queue("a", parent="org", capability={GPU: 6000}),
            queue("b", parent="org"),
        ]
    )
    two = np.zeros(len(axis), dtype=np.int64)
    two[g] = 2000
    quota = Quota(tree, axis, {"b": two * 2})  # b holds 4 GPUs of org's 8
    assert quota.room("a")[g] == 4000  # org's 8 - 4, tighter than a's own 6
    assert quota.room("b")[g] == 4000
    assert quota.room("default")[g] == UNLIMITED - 4000  # the root counts what b holds
    quota.charge("a", two)
    assert quota.used["org"][g] == 6000 and quota.used["a"][g] == 2000
    assert quota.over("a", two) is None
    quota.charge("a", two)
    assert quota.over("a", two) == ("org", g)
    assert quota.refusal("b", two) == (
        "queue org (an ancestor of b) capability: 8 nvidia.com/gpu allowed, "
        "8 nvidia.com/gpu in use, the gang needs 2 nvidia.com/gpu more"
    )
    quota.charge("b", -two)  # an eviction gives it back
    assert quota.over("b", two) is None
    assert quota.over("nope", two) is None  # not in the tree: the book refuses it elsewhere


def test_a_request_for_nothing_it_limits_always_passes() -> None:
    axis = ResourceAxis([GPU])
    tree = QueueTree.build([queue("a", capability={GPU: 0})])
    quota = Quota(tree, axis, {})
    cpu_only = np.zeros(len(axis), dtype=np.int64)
    cpu_only[axis.index["cpu"]] = 1000
    assert quota.over("a", cpu_only) is None
