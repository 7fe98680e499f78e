"""The look-ahead: the shapes the cluster runs keep their homes; a lone pod goes where
none is lost."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from tests.scheduler.helpers import placed

from tierra.scheduler import ClusterStore, SchedulerConfig, WeightedPolicy, run_session
from tierra.scheduler.scoring.binpack import Binpack
from tierra.scheduler.scoring.lookahead import Lookahead, home
from tierra.scheduler.scoring.mix import top_shapes
from tierra.scheduler.testing import hypernode, node, pod, podgroup, snapshot

GB200 = {"nvidia.com/gpu.product": "NVIDIA-GB200"}


def test_the_mix_is_what_holds_the_gpus() -> None:
    assert top_shapes({(4, 4): 48, (1, 8): 16, (2, 8): 0}) == top_shapes({(4, 4): 3, (1, 8): 1})
    (first, second) = top_shapes({(4, 4): 48, (1, 8): 16})
    assert (first.pods, first.gpus_per_pod, first.weight) == (4, 4, 0.75)
    assert second.weight == 0.25 and first.gpus == 16
    assert top_shapes({}) == ()
    assert len(top_shapes({(n, 1): 1 for n in range(1, 20)})) == 8


def cluster(*extra: object) -> ClusterStore:
    """Two 4-tray GB200 racks (one running a 4 x 4-GPU gang) and a ToR of two H100s."""
    trays = [node(f"r{r}t{i}", gpu=4, cpu=144, labels=GB200) for r in range(2) for i in range(4)]
    h100 = [node("h0", gpu=8), node("h1", gpu=8)]
    hns = [
        hypernode("rack0", 1, nodes=[f"r0t{i}" for i in range(4)], gbps=1800),
        hypernode("rack1", 1, nodes=[f"r1t{i}" for i in range(4)], gbps=1800),
        hypernode("tor", 1, nodes=["h0", "h1"], gbps=100),
        hypernode("spine", 2, children=["rack0", "rack1", "tor"], gbps=100),
    ]
    running = [pod(f"g-{i}", group="g", gpu=4, node_name=f"r1t{i}") for i in range(4)]
    cache = ClusterStore.from_snapshot(snapshot([*trays, *h100], hns, running, [podgroup("g", 4)]))
    for p in extra:
        cache.upsert_pod(p)  # type: ignore[arg-type]
    return cache


def test_the_cache_counts_gpus_per_gang_shape() -> None:
    cache = cluster()
    assert dict(cache.shape_gpus) == {(4, 4): 16}
    cache.remove_pod("default/g-0")
    assert dict(cache.shape_gpus) == {(4, 4): 12}


def test_a_shape_is_at_home_where_it_is_fastest() -> None:
    cache = cluster()
    (shape,) = top_shapes(cache.shape_gpus)
    found = home(cache.view, cache.links(), shape, cache.capacity.axis.index["nvidia.com/gpu"])
    assert found is not None and found.tier == 1
    ix = cache.index
    assert [ix.names[h] for h in np.flatnonzero(found.mask)] == ["rack0", "rack1"]


def test_a_lone_pod_keeps_the_free_rack_whole() -> None:
    """A 4-GPU pod fills a GB200 tray exactly (binpack's favourite) or half an H100 node.
    With a 16-GPU gang running, the tray would break the free rack its like needs."""
    lone = pod("lone", gpu=4)
    cache = cluster()
    view = replace(cache.view, links=cache.links(), mix=top_shapes(cache.shape_gpus))
    nodes = np.array([cache.index.node_ix[n] for n in ("r0t0", "h0")], dtype=np.int64)
    vec = cache.capacity.axis.vector(lone.requests)
    got = Lookahead().node_scores(view, vec, nodes, cache.index.root, None)
    assert got[0] == pytest.approx(1 / (1 + 16 / 4)) and got[1] == 1.0
    no_mix = replace(view, mix=())
    assert Lookahead().node_scores(no_mix, vec, nodes, cache.index.root, None).tolist() == [1, 1]
    binpack = SchedulerConfig(policies=(WeightedPolicy(Binpack(), 1.0),))
    assert set(placed(run_session(cluster(lone), binpack)).values()) == {"r0t0"}
    result = run_session(cluster(lone), SchedulerConfig())  # the defaults weigh it in
    assert set(placed(result).values()) in ({"h0"}, {"h1"})
