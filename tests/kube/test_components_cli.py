"""``tierra controller`` and ``tierra webhook`` refuse bad input before anything runs:
exit 2, one message naming what is wrong, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tierra.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_controller_needs_exactly_one_configuration(tmp_path: Path) -> None:
    code, out = run("controller")
    assert code == 2 and "exactly one of --config FILE and --config-map NAME" in out
    (tmp_path / "c.yaml").write_text("sources: [{name: dra}]\n")
    code, out = run("controller", "--config", str(tmp_path / "c.yaml"), "--config-map", "x")
    assert code == 2


def test_controller_reports_every_configuration_problem(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("sources:\n- name: labels\n- name: ufm\n  url: https://ufm\n")
    code, out = run("controller", "--config", str(path))
    assert code == 2
    assert "sources[0]: the labels source needs levels" in out
    assert "sources[1].credentialsSecret: is required with url" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("command", ["controller", "webhook"])
def test_a_missing_kubeconfig_is_exit_2(tmp_path: Path, command: str) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("sources: [{name: dra}]\n")
    args = ["--config", str(config)] if command == "controller" else []
    code, out = run(command, "--kubeconfig", str(tmp_path / "none"), *args, "--health-port", "0")
    assert code == 2 and "kubeconfig not found" in out


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--certificates", "vault"], "--certificates takes self or cert-manager"),
        (["--ip", "localhost"], "--ip 'localhost' is not an IP address"),
        (["--podgroup-groups", "kueue"], "--podgroup-groups takes tierra and/or volcano"),
    ],
)
def test_webhook_flags(args: list[str], want: str) -> None:
    code, out = run("webhook", *args)
    assert code == 2 and want in out
