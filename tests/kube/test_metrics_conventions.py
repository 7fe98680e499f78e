"""The components' ``/metrics`` look alike: process metrics, no ``_created`` series, one
leader metric; and the scheduler's default port is its own, in the code and the manifests."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client import generate_latest

from tierra.kube.controller.metrics import Metrics as ControllerMetrics
from tierra.kube.metrics import LEADER
from tierra.kube.scheduler.component import Options
from tierra.kube.scheduler.metrics import Metrics as SchedulerMetrics
from tierra.kube.webhook.app import Metrics as WebhookMetrics

REPO = Path(__file__).resolve().parents[2]
KUBE_SCHEDULER_PORT = 10259


def exposition() -> dict[str, str]:
    scheduler, controller, webhook = SchedulerMetrics(), ControllerMetrics(), WebhookMetrics()
    scheduler.sessions.inc()
    scheduler.session_seconds.observe(0.1)
    controller.passes.labels("status").inc()
    webhook.observe("HyperNode", True, 0.01)
    return {
        "scheduler": generate_latest(scheduler.registry).decode(),
        "controller": generate_latest(controller.registry).decode(),
        "webhook": generate_latest(webhook.registry).decode(),
    }


def test_every_component_has_process_metrics_and_no_created_series() -> None:
    for component, text in exposition().items():
        names = {line.split("{")[0].split()[0] for line in text.splitlines() if line[:1] != "#"}
        assert "process_resident_memory_bytes" in names, component
        assert "process_start_time_seconds" in names, component
        assert "python_gc_collections_total" in names, component
        assert not [n for n in names if n.endswith("_created")], component
        assert any(n.endswith("_total") for n in names), component  # counters still there


def test_one_leader_metric_in_scheduler_and_controller() -> None:
    texts = exposition()
    for component in ("scheduler", "controller"):
        assert f'{LEADER}{{component="{component}"}} 0.0' in texts[component]
        names = {line.split("{")[0].split()[0] for line in texts[component].splitlines()}
        assert {n for n in names if "leader" in n} == {LEADER}, component
    assert LEADER == "tierra_is_leader"


def test_the_scheduler_default_port_is_its_own_everywhere() -> None:
    o = Options()
    assert o.metrics_port == o.health_port == 8090 != KUBE_SCHEDULER_PORT
    deployment = yaml.safe_load((REPO / "deploy/base/scheduler.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-port=8090" in container["args"]
    assert [p["containerPort"] for p in container["ports"]] == [8090]
    readme = (REPO / "README.md").read_text()
    assert "[--metrics-port 8090] [--health-port 8090]" in readme
    for doc in ("README.md", "deploy/README.md", "src/tierra/kube/README.md"):
        text = (REPO / doc).read_text()
        assert f"port {KUBE_SCHEDULER_PORT}" not in text and "port=10259" not in text, doc
