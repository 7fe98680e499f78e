"""Fixtures for tests against a real kube-apiserver and etcd.

One control plane serves the whole session (starting one takes seconds, a test takes
milliseconds); tests isolate themselves with their own namespaces and object names instead.
Without the binaries every test here is skipped with the reason naming what is missing;
``make test`` builds them first, so on the project's machines they run.

Tests are plain functions that call ``asyncio.run``: no async plugin is needed.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tierra.kube.manifests import crd_files, crd_folder
from tierra.kube.testing import Binaries, ControlPlane, ControlPlaneUnavailable
from tierra.kube.testing.controlplane import DRA_WORKLOAD_ARGS, WORKLOAD_API_ARGS

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = (
    "hypernodes.topology.tierra.dev",
    "hypernodes.topology.volcano.sh",
    "podgroups.scheduling.volcano.sh",
    "queues.scheduling.volcano.sh",
)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(binaries, apiserver_args=WORKLOAD_API_ARGS) as plane:
        yield plane


@pytest.fixture(scope="session")
def crds(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with tierra's and Volcano's CRDs applied and Established."""
    assert len(crd_files()) == len(CRD_NAMES)
    control_plane.kubectl("apply", "-f", str(crd_folder()))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in CRD_NAMES)
    )
    return control_plane


_namespaces = itertools.count()


@pytest.fixture
def namespace(control_plane: ControlPlane) -> str:
    """A fresh namespace; never deleted (no namespace controller runs to finish a delete)."""
    name = f"t{next(_namespaces)}"
    control_plane.kubectl("create", "namespace", name)
    return name


@pytest.fixture
def run_api(control_plane: ControlPlane) -> Callable[[Callable[[Any], Awaitable[Any]]], Any]:
    """``run_api(body)`` runs ``await body(core_v1_api)`` as admin in a fresh event loop."""
    pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")
    from tierra.kube.testing.fake import core_api

    def run(body: Callable[[Any], Awaitable[T]]) -> T:
        async def main() -> T:
            async with control_plane.api_client() as api_client:
                return await body(core_api(api_client))

        return asyncio.run(main())

    return run


@pytest.fixture(scope="session")
def tierra_plane() -> Iterator[ControlPlane]:
    """A second control plane with tierra installed from ``deploy/`` and the identities of
    its components (see ``deploy_helpers``): its webhook configuration and cluster roles
    must not leak into the other tests' cluster. The Workload API is on, as in the other,
    so the scheduler's and the webhook's roles are proven for upstream PodGroups too, with
    DRAWorkloadResourceClaims (the webhook judges the claims a PodGroup shares)."""
    from deploy_helpers import identities, install

    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        pytest.skip(f"no control plane: {exc}")
    with ControlPlane(
        binaries, extra_identities=identities(), apiserver_args=DRA_WORKLOAD_ARGS
    ) as plane:
        install(plane)
        yield plane
