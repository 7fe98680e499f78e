"""Capability accounting: a queue and every ancestor, pod by pod."""

from __future__ import annotations

import numpy as np

from tierra.scheduler.queueing.queue_tree import QueueTree
from tierra.scheduler.queueing.quota import UNLIMITED, Quota
from tierra.scheduler.testing import queue
from tierra.topology.capacity import ResourceAxis

GPU = "nvidia.com/gpu"


def test_the_tightest_capability_up_the_tree_applies() -> None:
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
    five = np.zeros(len(axis), dtype=np.int64)
    five[g] = 5000
    assert quota.over("a", five) == ("org", g)  # org has 8 - 4 left, a itself would take 6
    assert quota.over("default", five * 1000) is None
    assert quota.used["root"][g] == 4000 and quota.cap["root"][g] == UNLIMITED
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
