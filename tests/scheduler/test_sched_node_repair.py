"""Node repair (issue 21; Kueue's TASFailedNodeReplacement): a running gang's replacement
pods go beside its survivors -- their domain if it has room, else the smallest domain
above it that has, within the hard limit -- or wait with a reason. The search's sticky
ordering already tried these first; ``NodeRepair`` makes it the rule (domains apart from
the survivors are no candidates), and these cases decide the same with it as before."""

from __future__ import annotations

from tierra.scheduler import ClusterStore, Code, SchedulerConfig, SessionResult, run_session
from tierra.scheduler.testing import canonical, pod, podgroup, snapshot, topology


def repair(extra_busy: list[int], tier: int, *, broken: int = 1) -> SessionResult:
    """Gang "job" (2 x 8 GPUs) ran on node-0 and node-1 (s0); node-``broken`` is NotReady
    and its pod was replaced by ``job-new``; ``extra_busy`` nodes are full."""
    nodes, hns = canonical()
    nodes = [n if n.name != f"node-{broken}" else canonical(ready=False)[0][broken] for n in nodes]
    survivor = pod("job-0", group="job", node_name="node-0", gpu=8)
    new = pod("job-new", group="job", gpu=8)
    busy = [pod(f"b{i}", group=f"b{i}", node_name=f"node-{i}", gpu=8) for i in extra_busy]
    pgs = [podgroup("job", 2, network_topology=topology(tier=tier))]
    pgs += [podgroup(f"b{i}", 1) for i in extra_busy]
    store = ClusterStore.from_snapshot(snapshot(nodes, hns, [survivor, new, *busy], pgs))
    return run_session(store, SchedulerConfig())


def test_the_replacement_stays_in_the_survivors_domain_when_it_has_room() -> None:
    # s0 = node-0 + node-1 has no room (node-1 NotReady): s4 (s0 + s1) is the smallest
    # domain holding the survivor and a free node; s2/s3 (emptier, same tier) are not
    result = repair([], tier=3)
    (b,) = result.bindings
    assert b.node in ("node-2", "node-3") and b.hypernode == "s4"


def test_the_smallest_domain_above_when_its_own_is_full() -> None:
    result = repair([2, 3], tier=3)  # s1 full too: s6 via s5's nodes
    (b,) = result.bindings
    assert b.node in ("node-4", "node-5", "node-6", "node-7") and b.hypernode == "s6"


def test_it_waits_with_a_reason_when_the_hard_limit_has_no_room() -> None:
    result = repair([], tier=1)
    assert result.bindings == ()
    (u,) = result.unschedulable
    assert u.podgroup == "default/job" and u.status.code is Code.UNSCHEDULABLE
    assert "s0" in u.reason
