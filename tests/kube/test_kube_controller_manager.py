"""The opt-in kube-controller-manager: its namespace controller empties and removes a
deleted namespace, its garbage collector deletes what an owner that went away owned."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tierra.kube.testing import (
    Binaries,
    ControllerManager,
    ControlPlane,
    ControlPlaneUnavailable,
    find_binary,
)

pytestmark = pytest.mark.kube


@pytest.fixture(scope="module")
def managed_plane() -> Iterator[ControlPlane]:
    try:
        binaries = Binaries.find()
        find_binary("kube-controller-manager")
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries) as plane, ControllerManager(plane):
        yield plane


def wait_gone(plane: ControlPlane, *what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = plane.kubectl("get", *what, "--ignore-not-found", "-o", "name", check=False)
        if result.returncode == 0 and not result.stdout.strip():
            return
        assert time.monotonic() < deadline, f"still there after {timeout} s: {result.stdout}"
        time.sleep(0.3)


def test_deleting_a_namespace_deletes_what_is_in_it(managed_plane: ControlPlane) -> None:
    plane = managed_plane
    plane.kubectl("create", "namespace", "doomed")
    plane.kubectl("-n", "doomed", "create", "configmap", "settings", "--from-literal=a=1")
    plane.kubectl("-n", "doomed", "create", "serviceaccount", "worker")
    plane.kubectl("delete", "namespace", "doomed", "--wait=false")
    wait_gone(plane, "namespace", "doomed")
    # Recreated, the namespace is empty: its old contents went with it.
    plane.kubectl("create", "namespace", "doomed")
    left = plane.kubectl("-n", "doomed", "get", "configmap,serviceaccount", "-o", "name")
    assert "settings" not in left.stdout and "worker" not in left.stdout


def test_the_garbage_collector_deletes_an_owned_object(managed_plane: ControlPlane) -> None:
    plane = managed_plane
    plane.kubectl("create", "namespace", "gc")
    plane.kubectl("-n", "gc", "create", "configmap", "owner")
    owner = json.loads(plane.kubectl("-n", "gc", "get", "configmap", "owner", "-o", "json").stdout)
    owned = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "owned",
            "namespace": "gc",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                }
            ],
        },
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(owned))
    plane.kubectl("-n", "gc", "create", "secret", "generic", "unowned")
    # Orphan-free background deletion: the API server removes the owner at once and the
    # collector (not the client) deletes its dependents.
    plane.kubectl("-n", "gc", "delete", "configmap", "owner", "--cascade=background")
    wait_gone(plane, "-n", "gc", "secret", "owned")
    assert plane.kubectl("-n", "gc", "get", "secret", "unowned", check=False).returncode == 0
