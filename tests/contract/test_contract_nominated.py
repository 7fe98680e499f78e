"""``nominatedNodeName`` kept in mind, as kube-scheduler's nominator does
(``RunFilterPluginsWithNominatedPods``/``addGENominatedPods``, ``evaluateNominatedNode``):
a pending pod nominated to a node holds its room against pods of equal or lower priority,
tries that node first, and holds nothing once bound, gone, or nominated to no node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from tests.contract.manifests import node, pod
from tests.run_cli import run as tierra

from tierra.api.node import decode_node
from tierra.api.pod import decode_pod
from tierra.scheduler import Memory, SchedulerConfig, run_session
from tierra.scheduler.podrules.nominated import nominations_of
from tierra.scheduler.state.store import ClusterStore

CPU8 = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "8"}}}]}
MISSING = [{"name": "d", "persistentVolumeClaim": {"claimName": "missing"}}]


def schedule(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    f = tmp_path / "snap.yaml"
    f.write_text(yaml.safe_dump_all(docs))
    code, out, err = tierra("schedule", f, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    bound = {b["pod"].split("/")[1]: b["node"] for b in doc["bindings"]}
    waiting = {u["podGroup"].split("/")[1]: u["reason"] for u in doc["unschedulable"]}
    return bound, waiting


def nominated(name: str, to: str, priority: int, **spec: Any) -> dict[str, Any]:
    """A pending pod nominated to ``to``; ``MISSING`` volumes keep it from binding, as
    its victims' termination would."""
    doc = pod(name, priority=priority, **{**CPU8, **spec})
    doc["status"]["nominatedNodeName"] = to
    return doc


def test_a_nominated_node_holds_its_room_against_equal_priority(tmp_path: Path) -> None:
    """``addGENominatedPods``: nominated pods of equal or higher priority are added first,
    so an equal-priority pod does not fit beside the held room."""
    held = nominated("preemptor", "n2", 100, volumes=MISSING)
    other = pod("other", priority=100, **CPU8)
    bound, waiting = schedule(tmp_path, [node("n2", cpu="8"), held, other])
    assert bound == {}
    assert "status.nominatedNodeName" in waiting["other"]
    bound, _ = schedule(tmp_path, [node("n1", cpu="8"), node("n2", cpu="8"), held, other])
    assert bound == {"other": "n1"}


def test_a_higher_priority_pod_may_take_the_room(tmp_path: Path) -> None:
    """Only pods of equal or higher priority are added: a higher-priority pod fits."""
    held = nominated("preemptor", "n2", 100, volumes=MISSING)
    urgent = pod("urgent", priority=1000, **CPU8)
    assert schedule(tmp_path, [node("n2", cpu="8"), held, urgent])[0] == {"urgent": "n2"}


def test_the_nominated_pod_goes_to_its_node_first(tmp_path: Path) -> None:
    """``evaluateNominatedNode``: the nominated node is tried first (by name and by
    binpacking, n1 would be chosen)."""
    docs = [node("n1", cpu="16"), node("n2", cpu="8"), pod("busy", node_name="n1", **CPU8)]
    assert schedule(tmp_path, [*docs, pod("plain", **CPU8)])[0] == {"plain": "n1"}
    assert schedule(tmp_path, [*docs, nominated("p", "n2", 0)])[0] == {"p": "n2"}


def test_nominations_that_hold_nothing(tmp_path: Path) -> None:
    """A node that is gone, and another scheduler's pod, hold no room here (kube-scheduler's
    nominator keeps only its own pods)."""
    gone = nominated("gone", "n9", 100, volumes=MISSING)
    theirs = nominated("theirs", "n2", 100, schedulerName="default-scheduler")
    other = pod("other", priority=100, **CPU8)
    bound, _ = schedule(tmp_path, [node("n2", cpu="8"), gone, theirs, other])
    assert bound == {"other": "n2"}


def test_the_hold_follows_the_pod() -> None:
    """The store's nominations follow its pods: bound or deleted, the hold is gone;
    pending again (a failed binding), it is back."""
    store = ClusterStore(nodes=[decode_node(node("n2", cpu="8"), None, [])])
    doc = nominated("p", "n2", 100)
    pending = decode_pod(doc, None, [])
    store.upsert_pod(pending)
    book = nominations_of(store)
    assert set(book.holds) == {"default/p"}
    store.upsert_pod(decode_pod({**doc, "spec": {**doc["spec"], "nodeName": "n2"}}, None, []))
    assert book.holds == {}
    store.upsert_pod(pending)
    assert set(book.holds) == {"default/p"}
    store.remove_pod("default/p")
    assert book.holds == {}


def test_a_gang_held_out_is_tried_again_when_the_nomination_goes() -> None:
    """A gang kept out by a nomination waits (and a Memory skips it while nothing
    changes); when the nominated pod gives the nomination up, the room counts as freed
    and the next session places the gang."""
    store = ClusterStore(nodes=[decode_node(node("n2", cpu="8"), None, [])])
    held = nominated("preemptor", "n2", 100, volumes=MISSING)
    store.upsert_pod(decode_pod(held, None, []))
    store.upsert_pod(decode_pod(pod("other", priority=100, **CPU8), None, []))
    memory = Memory()
    first = run_session(store, SchedulerConfig(), memory=memory)
    assert not first.bindings
    assert not run_session(store, SchedulerConfig(), memory=memory).bindings  # skipped
    gave_up = {**held, "status": {"phase": "Pending"}}  # the field cleared
    store.upsert_pod(decode_pod(gave_up, None, []))
    third = run_session(store, SchedulerConfig(), memory=memory)
    assert [(b.pod, b.node) for b in third.bindings] == [("default/other", "n2")]
