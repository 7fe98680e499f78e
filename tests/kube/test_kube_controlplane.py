"""The control plane itself: the pinned versions, the identities, finding binaries, and
leaving nothing behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tierra.kube.testing import (
    ETCD_VERSION,
    HELM_VERSION,
    K8S_VERSION,
    KUBE_SCHEDULER,
    Binaries,
    ControlPlane,
    ControlPlaneUnavailable,
    cache_folder,
    find_binary,
)

pytestmark = pytest.mark.kube

HACK = Path(__file__).resolve().parents[2] / "hack" / "controlplane"


def pinned(go_mod: Path, module: str) -> str:
    match = re.search(rf"^\s*{re.escape(module)} (v\S+)", go_mod.read_text(), re.MULTILINE)
    assert match, f"{module} not required in {go_mod}"
    return match.group(1)


def test_python_versions_match_the_go_modules() -> None:
    assert pinned(HACK / "kube" / "go.mod", "k8s.io/kubernetes") == K8S_VERSION
    assert pinned(HACK / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3") == ETCD_VERSION
    assert pinned(HACK / "helm" / "go.mod", "helm.sh/helm/v4") == HELM_VERSION


def test_every_staging_module_is_pinned_to_the_matching_release() -> None:
    """A missing replace gives `unknown revision v0.0.0`; a mismatched one, compile errors."""
    text = (HACK / "kube" / "go.mod").read_text()
    replaces = dict(re.findall(r"^\s*(k8s\.io/\S+) => k8s\.io/\S+ (v\S+)$", text, re.MULTILINE))
    assert len(replaces) == 33
    assert set(replaces.values()) == {K8S_VERSION.replace("v1.", "v0.", 1)}


def test_build_script_and_python_agree_on_the_cache_folder() -> None:
    result = subprocess.run(
        ["bash", HACK / "build.sh", "--print-cache-dir"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(result.stdout.strip()) == cache_folder()


def test_build_script_only_checks_kubebuilder_assets(tmp_path: Path) -> None:
    for name in ("etcd", "kube-apiserver"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    env = {**os.environ, "KUBEBUILDER_ASSETS": str(tmp_path)}
    ok = subprocess.run(
        ["bash", HACK / "build.sh"], env=env, capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == str(tmp_path)
    assert "kube-scheduler is absent" in ok.stderr
    (tmp_path / "etcd").unlink()
    bad = subprocess.run(
        ["bash", HACK / "build.sh"], env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 1
    assert f"missing {tmp_path}/etcd" in bad.stderr
    assert bad.stdout == ""


def test_missing_binaries_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_ASSET_ETCD", raising=False)
    monkeypatch.delenv("TEST_ASSET_KUBE_APISERVER", raising=False)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "assets"))
    monkeypatch.setenv("TIERRA_CONTROLPLANE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ControlPlaneUnavailable) as info:
        Binaries.find()
    message = str(info.value)
    assert f"etcd {ETCD_VERSION} and kube-apiserver {K8S_VERSION} not found" in message
    assert str(tmp_path / "assets" / "kube-apiserver") in message
    assert "make controlplane-build" in message


def test_test_asset_variable_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    etcd = tmp_path / "my-etcd"
    etcd.write_text("#!/bin/sh\n")
    etcd.chmod(0o755)
    monkeypatch.setenv("TEST_ASSET_ETCD", str(etcd))
    assert find_binary("etcd") == etcd


def test_version_endpoint_tells_the_truth(control_plane: ControlPlane) -> None:
    version = json.loads(control_plane.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == K8S_VERSION
    assert version["gitTreeState"] == "clean"


def test_scheduler_identity_has_the_scheduler_role_only(control_plane: ControlPlane) -> None:
    def can(*args: str) -> str:
        result = control_plane.kubectl("auth", "can-i", *args, user=KUBE_SCHEDULER, check=False)
        return result.stdout.strip()

    assert can("create", "pods", "--subresource=binding", "-n", "default") == "yes"
    assert can("watch", "nodes") == "yes"
    assert can("delete", "nodes") == "no"
    assert can("create", "customresourcedefinitions") == "no"


def test_stop_leaves_nothing_behind_even_after_a_failure(control_plane: ControlPlane) -> None:
    # The session's control plane proves the binaries exist; this test starts its own.
    plane = ControlPlane()
    seen: dict[str, Any] = {}

    def failing_test() -> None:
        with plane:
            seen["workdir"] = plane.workdir
            seen["pids"] = [p.pid for p in plane.processes]
            raise RuntimeError("test failed here")

    with pytest.raises(RuntimeError, match="test failed here"):
        failing_test()
    assert len(seen["pids"]) == 2
    assert not seen["workdir"].exists()
    for pid in seen["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.parametrize("workload_api", [False, True])
def test_up_command_serves_until_interrupted(
    control_plane: ControlPlane, workload_api: bool
) -> None:
    """What `make controlplane-up` runs: prints the kubeconfig, Ctrl-C stops and cleans up;
    `WORKLOAD_API=1` (`--workload-api`) serves scheduling.k8s.io/v1alpha2, off without it."""
    flags = ["--workload-api"] if workload_api else []
    process = subprocess.Popen(
        [sys.executable, "-m", "tierra.kube.testing", "up", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        kubeconfig = ""
        for line in process.stdout:
            if "export KUBECONFIG=" in line:
                kubeconfig = line.split("=", 1)[1].strip()
            if line.startswith("Ctrl-C"):
                break
        assert kubeconfig, process.stderr.read() if process.stderr else ""
        config = json.loads(Path(kubeconfig).read_text())
        assert config["users"][0]["name"] == "admin"
        kubectl = str(find_binary("kubectl"))
        found = subprocess.run(
            [kubectl, "--kubeconfig", kubeconfig, "api-resources", "--api-group=scheduling.k8s.io"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        served = {line.split()[0] for line in found.splitlines()[1:]}
        assert ({"podgroups", "workloads"} <= served) is workload_api, found
        process.send_signal(2)  # SIGINT, as Ctrl-C in a terminal
        assert process.wait(timeout=30) == 0
        assert not Path(kubeconfig).parent.exists()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
