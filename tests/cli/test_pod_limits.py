"""A container's limit is its request when it gives no request, as the API server defaults
it: the examples now give GPU limits (a real API server refuses a GPU request without
one), and a manifest giving only ``limits`` must not read as asking for no GPUs."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()

NODE = """apiVersion: v1
kind: Node
metadata: {name: gpu-0}
status: {allocatable: {cpu: "32", nvidia.com/gpu: "8", pods: "110"}}
"""


def pod(name: str, resources: str) -> str:
    return f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  schedulerName: tierra
  containers: [{{name: c, image: x, resources: {resources}}}]
"""


def test_limits_alone_are_the_request(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(
        NODE
        + pod("a", '{limits: {nvidia.com/gpu: "8"}}')
        + pod("b", '{limits: {nvidia.com/gpu: "8"}}')
        + pod("c", '{requests: {cpu: "1"}, limits: {cpu: "2"}}')
    )
    result = runner.invoke(app, ["schedule", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    bound = sorted(b["pod"] for b in out["bindings"])
    # 8 GPUs each on one 8-GPU node: one of a/b waits; c asks 1 CPU (its request wins)
    assert bound in (["default/a", "default/c"], ["default/b", "default/c"])
    assert [u["podGroup"] for u in out["unschedulable"]] in (["default/a"], ["default/b"])
    assert "nvidia.com/gpu" in out["unschedulable"][0]["reason"]
