"""The image ``make image`` builds from ``deploy/Dockerfile``, run on this machine.

``hack/image/build.sh`` builds it with buildah (its base from Debian's packages when no
registry answers) and skips the build when the image carries the hash of what goes into it,
so only the first run on a machine pays for it. ``buildah run --isolation chroot`` runs it
here (``podman run`` cannot: setrlimit is not permitted in these sandboxes).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("kubernetes_asyncio", reason="the Kubernetes client is not installed")

from deploy_helpers import DEPLOY, REPO, rendered
from e2e_cluster import Fabric, volcano_gang, wait_bound
from kube_helpers import kube_for

from tierra import __version__
from tierra.kube.testing import ControlPlane, ManagedProcess
from tierra.kube.testing.controlplane import free_ports

pytestmark = pytest.mark.kube
BUILD = REPO / "hack" / "image" / "build.sh"
USER = "65532"  # runAsUser in every Deployment


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("buildah") is None:
        pytest.skip("buildah is not installed (`make image` installs it with mmdebstrap)")
    result = subprocess.run(
        ["bash", str(BUILD)], capture_output=True, text=True, timeout=1500, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip()


@pytest.fixture
def container(image: str) -> Iterator[str]:
    name = subprocess.run(
        ["buildah", "from", "--pull-never", image], capture_output=True, text=True, check=True
    ).stdout.strip()
    yield name
    subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def run_in(container: str, *argv: str, mounts: tuple[str, ...] = ()) -> list[str]:
    volumes = [arg for m in mounts for arg in ("-v", m)]
    return ["buildah", "run", "--isolation", "chroot", *volumes, container, "--", *argv]


def test_the_image_runs_as_the_deployments_user(container: str) -> None:
    out = subprocess.run(
        run_in(container, "sh", "-c", "id -u; id -g; tierra --version"),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert out == [USER, USER, "tierra", __version__]


def test_the_manifests_name_the_image_that_is_built(tierra_plane: ControlPlane) -> None:
    """``make image`` tags ``localhost/tierra:<version>``; the Deployments say
    ``tierra:<version>``, the same short name a registry prefix is put in front of."""
    for overlay in ("standalone", "volcano"):
        for d in rendered(tierra_plane, DEPLOY / "overlays" / overlay):
            if d["kind"] == "Deployment":
                (c,) = d["spec"]["template"]["spec"]["containers"]
                assert c["image"] == f"tierra:{__version__}"


def readable_copy(plane: ControlPlane, folder: Path) -> Path:
    """The admin kubeconfig and the API server's CA where the image's user may read them."""
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    shutil.copy(plane.ca_file, folder / "ca.crt")
    text = plane.kubeconfig.read_text().replace(str(plane.ca_file), "/config/ca.crt")
    (folder / "kubeconfig").write_text(text)
    for f in folder.iterdir():
        f.chmod(0o644)
    return folder


def test_tierra_scheduler_from_the_image_binds_a_gang(
    crds: ControlPlane, container: str, tmp_path: Path
) -> None:
    plane = crds
    config = readable_copy(plane, tmp_path / "config")
    (port,) = free_ports(1)
    argv = run_in(
        container,
        "tierra",
        "scheduler",
        "--kubeconfig=/config/kubeconfig",
        "--scheduler-name=tierra-image",
        "--no-leader-elect",
        f"--metrics-port={port}",
        f"--health-port={port}",
        "--bind-address=127.0.0.1",
        "--period=0.5",
        mounts=(f"{config}:/config:ro",),
    )
    fabric = Fabric("img", spines=1, racks=2, nodes=2)
    namespace = "image-gang"
    plane.kubectl("create", "namespace", namespace)
    process = ManagedProcess("tierra scheduler (image)", argv, tmp_path / "scheduler.log")
    try:

        async def body() -> dict[str, str]:
            async with kube_for(plane) as kube:
                await fabric.create(kube)
                await volcano_gang(
                    kube,
                    namespace,
                    "g",
                    2,
                    scheduler="tierra-image",
                    fabric=fabric,
                    gpus=8,
                    topology={"mode": "hard", "highestTierName": "rack"},
                )
                return await wait_bound(kube, namespace, 2, 120, process)

        placed = asyncio.run(body())
    finally:
        process.stop()
    assert len({fabric.rack_of(node) for node in placed.values()}) == 1, placed
