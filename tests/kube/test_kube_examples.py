"""The examples are objects a real API server accepts, and the README's snapshot command
keeps both HyperNode groups.

Every example file is applied to the test control plane with a server-side dry run (the
API server validates and admits each object, nothing is stored). Pods asking for GPUs
without limits were rejected there ("Limit must be set for non overcommitable resources").

Volcano's Job CRD (600 KB of schema) is not installed: a Job is created against a
permissive stand-in, and each task's pod template is checked as the Pod Volcano's job
controller creates from it, which is what a cluster would refuse.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_helpers import stand_in_crd

from tierra.api.snapshot import load_snapshot
from tierra.kube.testing import ControlPlane

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "examples").rglob("*.yaml") if p.name != "config.yaml")
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")


def dry_run(plane: ControlPlane, objects: list[dict[str, Any]]) -> str:
    """Server-side dry-run apply; the error text, or "" when every object was accepted.

    Conflicts are forced: other tests in the session may own the same objects' fields, and
    what is checked here is whether the server accepts the objects, not who manages them.
    """
    result = plane.kubectl(
        "apply", "--server-side", "--dry-run=server", "--field-manager=tierra-examples",
        "--force-conflicts", "-f", "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        check=False,
    )  # fmt: skip
    return "" if result.returncode == 0 else result.stderr.strip()


def task_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The Pod each task's template becomes (Volcano names them <job>-<task>-<index>)."""
    out = []
    for task in job["spec"]["tasks"]:
        template = task["template"]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    **template.get("metadata", {}),
                    "name": f"{job['metadata']['name']}-{task['name']}-0",
                    "namespace": job["metadata"].get("namespace", "default"),
                },
                "spec": {
                    **(
                        {"schedulerName": job["spec"]["schedulerName"]}
                        if "schedulerName" in job["spec"]
                        else {}
                    ),
                    **template["spec"],
                },
            }
        )
    return out


@pytest.fixture(scope="module")
def with_jobs(crds: ControlPlane) -> ControlPlane:
    stand_in_crd(crds, "batch.volcano.sh", "v1alpha1", "Job", "jobs", namespaced=True)
    crds.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/jobs.batch.volcano.sh"
    )
    return crds


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_is_accepted_by_the_api_server(
    with_jobs: ControlPlane, example: Path
) -> None:
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    assert docs
    # the Priority admission plugin reads a pod's PriorityClass from the store, where a
    # dry run puts nothing: an example's PriorityClasses are applied for real first
    classes = [d for d in docs if d["kind"] == "PriorityClass"]
    if classes:
        listing = {"apiVersion": "v1", "kind": "List", "items": classes}
        with_jobs.kubectl("apply", "-f", "-", input=json.dumps(listing))
    assert dry_run(with_jobs, docs) == ""
    for job in (d for d in docs if (d["apiVersion"], d["kind"]) == VOLCANO_JOB):
        assert dry_run(with_jobs, task_pods(job)) == ""


def test_a_gpu_request_without_a_limit_is_what_was_refused(with_jobs: ControlPlane) -> None:
    """The dry run can fail: the examples' old form is rejected."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-limit", "namespace": "default"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "8"}}}
            ]
        },
    }
    assert "Limit must be set for non overcommitable resources" in dry_run(with_jobs, [pod])


def readme_snapshot_command() -> list[str]:
    """The ``kubectl get ... -o yaml`` line of the README, without its redirection."""
    for line in (REPO / "README.md").read_text().splitlines():
        if line.startswith("kubectl get nodes,pods,"):
            return shlex.split(line.split(">")[0])[1:]
    raise AssertionError("the README has no snapshot command")


def test_the_readme_snapshot_keeps_both_hypernode_groups(
    crds: ControlPlane, tmp_path: Path
) -> None:
    for api, name in (
        ("topology.tierra.dev/v1alpha1", "readme-t"),
        ("topology.volcano.sh/v1alpha1", "readme-v"),
    ):
        hn = {
            "apiVersion": api,
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": 1,
                "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}],
            },
        }
        crds.kubectl("apply", "-f", "-", input=json.dumps(hn))
    try:
        dump = tmp_path / "snapshot.yaml"
        dump.write_text(crds.kubectl(*readme_snapshot_command()).stdout)
        names = {h.name: h.group for h in load_snapshot([dump]).hypernodes}
        assert names["readme-t"] == "topology.tierra.dev"
        assert names["readme-v"] == "topology.volcano.sh"
        # why the README spells both out: a bare 'hypernodes' resolves to one group only
        bare = crds.kubectl("get", "hypernodes", "-o", "jsonpath={.items[*].metadata.name}")
        assert ("readme-t" in bare.stdout.split()) != ("readme-v" in bare.stdout.split())
    finally:  # the control plane is shared by the session: leave no HyperNodes behind
        crds.kubectl("delete", "hypernodes.topology.tierra.dev/readme-t", "--ignore-not-found")
        crds.kubectl("delete", "hypernodes.topology.volcano.sh/readme-v", "--ignore-not-found")
