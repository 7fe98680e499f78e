"""deploy/README.md's install path, run as written on a fresh cluster with a real
kube-controller-manager: install (the dry run first), the components out of the cluster as
their ServiceAccounts, a gang bound in one rack the controller discovered, the webhook
refusing a bad HyperNode through the repointed configuration, and uninstall leaving nothing.

The README's shell blocks marked ``<!-- test: NAME -->`` are fed, in order, to one bash
(as a user types them into one terminal, so ``jobs`` sees the components it started). The
only changes: the example address 10.0.0.5 becomes 127.0.0.1 and the example ports free
ones (other programs on a test machine may hold 8080).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_helpers import DEPLOY, REPO, leftovers
from e2e_cluster import TIERRA

from tierra.kube.testing import (
    Binaries,
    ControllerManager,
    ControlPlane,
    ControlPlaneUnavailable,
    ManagedProcess,
    find_binary,
)
from tierra.kube.testing.controlplane import free_ports
from tierra.kube.testing.fake import NodeShape, PodShape, node_manifest, pod_manifest

pytestmark = pytest.mark.kube
README = DEPLOY / "README.md"
NS = "tierra-system"
ZONE, RACK = "topology.kubernetes.io/zone", "topology.tierra.dev/rack"


def readme_block(name: str) -> str:
    text = README.read_text()
    match = re.search(rf"<!-- test: {re.escape(name)}\b.*?-->\n```sh\n(.*?)```", text, re.S)
    assert match, f"deploy/README.md has no block marked <!-- test: {name} -->"
    return match.group(1)


class Terminal:
    """One bash reading the blocks from a pipe, stopping at the first failing command."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-eu"],
            stdin=subprocess.PIPE,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            text=True,
            start_new_session=True,
        )

    def run(self, block: str, timeout: float = 120) -> None:
        token = secrets.token_hex(6)
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{block}\necho {token}\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while token not in self.log.read_text():
            assert self.proc.poll() is None, (
                f"the block failed:\n{block}\n--- output:\n{self.tail()}"
            )
            assert time.monotonic() < deadline, f"the block hung:\n{block}\n{self.tail()}"
            time.sleep(0.2)

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-40:])

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # components left running by a failure
        self.proc.wait()
        self._out.close()


@pytest.fixture
def fresh_plane() -> Iterator[ControlPlane]:
    try:
        binaries = Binaries.find()
        find_binary("kube-controller-manager")
        find_binary("kubectl")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries) as plane, ControllerManager(plane):
        yield plane


def terminal_for(plane: ControlPlane, tmp_path: Path) -> Terminal:
    """A working folder like a checkout (deploy/ and src/ of this repository), kubectl and
    tierra on PATH, the admin's kubeconfig as KUBECONFIG."""
    work = tmp_path / "checkout"
    work.mkdir()
    for name in ("deploy", "src"):
        (work / name).symlink_to(REPO / name)
    tierra_bin = tmp_path / "bin"
    tierra_bin.mkdir()
    script = tierra_bin / "tierra"
    script.write_text(f"#!/bin/sh\nexec {' '.join(TIERRA[:-1])} '{TIERRA[-1]}' \"$@\"\n")
    script.chmod(0o755)
    kubectl = find_binary("kubectl").parent
    env = {
        **os.environ,
        "PATH": f"{tierra_bin}:{kubectl}:{os.environ['PATH']}",
        "KUBECONFIG": str(plane.kubeconfig),
    }
    return Terminal(work, env, tmp_path / "terminal.log")


def localised(block: str, ports: dict[str, int]) -> str:
    block = block.replace("10.0.0.5", "127.0.0.1")
    return re.sub(r"\b(8080|8081|8082|8083|8443)\b", lambda m: str(ports[m.group(1)]), block)


def apply(plane: ControlPlane, obj: dict[str, object]) -> None:
    plane.kubectl("create", "-f", "-", input=json.dumps(obj))


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def wait_for(what: str, check: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if callable(check) and check():
                return
        except (OSError, subprocess.CalledProcessError, ValueError, KeyError):
            pass
        assert time.monotonic() < deadline, f"not after {timeout} s: {what}"
        time.sleep(0.3)


def nodes(plane: ControlPlane) -> None:
    """Two racks of two nodes, labelled as the shipped configuration reads them."""
    for rack in ("a", "b"):
        for i in range(2):
            labels = {ZONE: "z1", RACK: f"rack-{rack}"}
            apply(plane, node_manifest(f"n-{rack}{i}", shape=NodeShape(), labels=labels))


def the_old_way_is_refused_and_counted(plane: ControlPlane, tmp_path: Path) -> None:
    """The controller as the admin (not exempt), the webhook not serving: every HyperNode
    write is refused, and the metric counts it."""
    (port,) = free_ports(1)
    process = ManagedProcess(
        "tierra controller (admin)",
        [
            *TIERRA,
            "controller",
            f"--kubeconfig={plane.kubeconfig}",
            f"--namespace={NS}",
            "--config-map=tierra-controller-config",
            "--no-leader-elect",
            f"--metrics-port={port}",
            f"--health-port={port}",
            "--bind-address=127.0.0.1",
        ],
        tmp_path / "controller-admin.log",
    )
    try:
        name = 'tierra_controller_admission_refused_total{cause="webhook-unreachable"'
        wait_for("refused writes counted", lambda: metric(port, name) > 0)
    finally:
        process.stop()
    assert "deploy/README.md" in process.log_path.read_text()  # the log says what to do
    hypernodes = plane.kubectl("get", "hypernodes.topology.tierra.dev", "-o", "name").stdout
    assert hypernodes.strip() == ""


def a_gang(plane: ControlPlane) -> None:
    plane.kubectl("create", "namespace", "train")
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "train"},
        "spec": {"minMember": 2, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
    }
    apply(plane, group)
    for i in range(2):
        pod = pod_manifest(
            f"g-{i}",
            "train",
            shape=PodShape(cpu="20"),
            scheduler_name="tierra",
            annotations={"scheduling.k8s.io/group-name": "g"},
        )
        apply(plane, pod)


def racks_of(plane: ControlPlane) -> list[str]:
    found = json.loads(plane.kubectl("get", "hypernodes.topology.tierra.dev", "-o", "json").stdout)
    return [h["metadata"]["name"] for h in found["items"] if h["spec"]["tier"] == 1]


def placements(plane: ControlPlane) -> dict[str, str]:
    pods = json.loads(plane.kubectl("-n", "train", "get", "pods", "-o", "json").stdout)
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in pods["items"]}


def test_the_readme_install_path_works_as_written(
    fresh_plane: ControlPlane, tmp_path: Path
) -> None:
    plane = fresh_plane
    ports = dict(zip(("8080", "8081", "8082", "8083", "8443"), free_ports(5), strict=True))
    terminal = terminal_for(plane, tmp_path)
    try:
        terminal.run(readme_block("install"))
        assert "(server dry run)" in terminal.log.read_text()
        nodes(plane)
        the_old_way_is_refused_and_counted(plane, tmp_path)

        terminal.run(localised(readme_block("out-of-cluster"), ports))
        work = tmp_path / "checkout"
        wait_for(
            "the webhook ready",
            lambda: (
                urllib.request.urlopen(f"http://127.0.0.1:{ports['8082']}/readyz", timeout=2).status
                == 200
            ),
        )
        wait_for("the controller's two racks", lambda: len(racks_of(plane)) == 2)
        a_gang(plane)
        wait_for("the gang bound", lambda: all(placements(plane).values()))
        racks = {n[: len("n-a")] for n in placements(plane).values()}
        assert len(racks) == 1, placements(plane)

        # The webhook answers through the url the README points the configuration at.
        bad = {
            "apiVersion": "topology.tierra.dev/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": "loop"},
            "spec": {
                "tier": 2,
                "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": "loop"}}}],
            },
        }
        refused = plane.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
        assert refused.returncode != 0
        assert 'admission webhook "hypernodes.topology.tierra.dev" denied' in refused.stderr
        for log in ("scheduler.log", "webhook.log"):
            assert "forbidden" not in (work / log).read_text().lower(), log
        leases = plane.kubectl("-n", NS, "get", "leases", "-o", "json").stdout
        holders = {
            item["metadata"]["name"]: item["spec"].get("holderIdentity")
            for item in json.loads(leases)["items"]
        }
        assert set(holders) == {"tierra-controller", "tierra-scheduler"} and all(holders.values())

        terminal.run(readme_block("uninstall"), timeout=180)
    finally:
        terminal.close()
    assert plane.kubectl("get", "namespace", NS, check=False).returncode != 0
    assert leftovers(plane) == []
