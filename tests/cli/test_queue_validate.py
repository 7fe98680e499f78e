"""``tierra validate`` reports a bad queue tree, each problem with its queue and field."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()

BAD_TREE = """\
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: org}
spec: {capability: {nvidia.com/gpu: "8"}, guarantee: {resource: {nvidia.com/gpu: "4"}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-a}
spec:
  parent: org
  capability: {nvidia.com/gpu: "16"}
  guarantee: {resource: {nvidia.com/gpu: "3"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: team-b}
spec: {parent: org, guarantee: {resource: {nvidia.com/gpu: "2"}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: x}
spec: {parent: y}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: y}
spec: {parent: x}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: lost}
spec: {parent: nowhere}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pg, namespace: default}
spec: {minMember: 1, queue: org}
"""


def test_validate_reports_a_bad_queue_tree(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(BAD_TREE)
    result = runner.invoke(app, ["validate", str(path), "-o", "json"])
    assert result.exit_code == 1, result.output
    found = {(p["object"], p["field"]) for p in json.loads(result.stdout)["problems"]}
    assert found == {
        ("Queue/org", "spec.guarantee.resource.nvidia.com/gpu"),  # 3 + 2 > 4
        ("Queue/team-a", "spec.capability.nvidia.com/gpu"),  # 16 > org's 8
        ("Queue/x", "spec.parent"),  # cycle
        ("Queue/y", "spec.parent"),
        ("Queue/lost", "spec.parent"),  # missing parent
        ("PodGroup/default/pg", "spec.queue"),  # a queue with children
    }
    text = runner.invoke(app, ["validate", str(path)])
    assert text.exit_code == 1
    assert "queue cycle x -> y -> x" in text.output
    assert "Traceback" not in text.output
