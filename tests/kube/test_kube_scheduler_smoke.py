"""kube-scheduler, built from the same release as the API server, binds fake pods to fake nodes.

This is the baseline tierra's scheduler is compared with; if it cannot bind 200 pods here,
the comparison benchmark would measure a broken setup.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tierra.kube.testing import KUBE_SCHEDULER, ControlPlane, ManagedProcess, find_binary
from tierra.kube.testing.controlplane import ControlPlaneUnavailable

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from tierra.kube.testing.fake import NodeShape, PodShape, create_nodes, create_pods, wait_all_bound

pytestmark = pytest.mark.kube


SCRIPT = Path(__file__).resolve().parents[2] / "hack" / "controlplane" / "run-kube-scheduler.sh"
NODES = 100
PODS = 200


@pytest.fixture
def kube_scheduler(control_plane: ControlPlane, tmp_path: Any) -> Iterator[ManagedProcess]:
    try:
        find_binary("kube-scheduler")
    except ControlPlaneUnavailable as exc:
        pytest.skip(str(exc))
    process = ManagedProcess(
        "kube-scheduler",
        [
            "bash",
            SCRIPT,
            "--kubeconfig",
            control_plane.kubeconfig_for(KUBE_SCHEDULER),
            "--config-dir",
            tmp_path,
        ],
        tmp_path / "kube-scheduler.log",
        env=dict(os.environ),
    )
    try:
        yield process
    finally:
        process.stop()


def test_kube_scheduler_binds_every_pod(
    control_plane: ControlPlane,
    namespace: str,
    kube_scheduler: ManagedProcess,
    run_api: Callable[..., Any],
) -> None:
    names = [f"smoke-{i:03d}" for i in range(NODES)]
    # 4 cpu per node and 1 cpu per pod: 200 pods need at least 50 nodes' worth of room, and
    # kube-scheduler's spreading puts them on many more.
    shape = NodeShape(cpu="4", memory="16Gi", pods=110)

    async def populate(api: Any) -> None:
        await create_nodes(api, names, shape=shape, labels=lambda n: {"tierra.dev/test": "smoke"})
        await create_pods(
            api,
            namespace,
            [f"p-{i:03d}" for i in range(PODS)],
            shape=PodShape(cpu="1"),
            # Other tests in the session create nodes too; keep to this test's own.
            node_selector={"tierra.dev/test": "smoke"},
        )

    run_api(populate)
    started = time.monotonic()
    try:
        placements = run_api(lambda api: wait_all_bound(api, namespace, PODS, timeout=90))
    except TimeoutError as exc:
        pytest.fail(f"{exc}; kube-scheduler log tail:\n{kube_scheduler.log_tail()}")
    elapsed = time.monotonic() - started

    assert kube_scheduler.poll() is None, kube_scheduler.log_tail()
    per_node = Counter(placements.values())
    assert set(per_node) <= set(names)
    assert max(per_node.values()) <= 4, "a node got more pods than it has cpus"
    assert sum(per_node.values()) == PODS
    print(f"kube-scheduler bound {PODS} pods on {NODES} nodes in {elapsed:.1f} s")
