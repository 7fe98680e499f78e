"""``tierra serve`` as a user runs it: it listens, answers, stops on Ctrl-C, fails clearly."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tierra.cli import app
from tierra.web.testing import start_serve

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CANONICAL = EXAMPLES / "canonical.yaml"
runner = CliRunner()
TIERRA = [sys.executable, "-c", "from tierra.cli import main; main()"]


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_serve_listens_answers_and_stops_on_ctrl_c() -> None:
    proc, url = start_serve([str(CANONICAL)])
    try:
        assert url.startswith("http://127.0.0.1:")
        summary = httpx.get(url + "api/summary", timeout=10).json()
        assert summary["counts"]["nodes"] == 8
        assert summary["source"] == {"mode": "snapshot", "description": str(CANONICAL)}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()


def test_bad_invocations_exit_2_with_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Node\n  : : [")
    cases = [
        ((str(CANONICAL), "--kubeconfig", str(CANONICAL)), "not both"),
        ((str(tmp_path / "missing.yaml"),), "missing.yaml"),
        ((str(bad),), "bad.yaml"),
        ((str(CANONICAL), "--report", str(tmp_path / "r.html")), "no such report"),
    ]
    for args, message in cases:
        code, out = run("serve", *args)
        assert code == 2, (args, out)
        assert message in out and "Traceback" not in out


def test_an_unusable_kubeconfig_exits_2_with_a_message(tmp_path: Path) -> None:
    # In a process of its own: reading a kubeconfig runs an event loop, and the browser
    # tests keep Playwright's in this one.
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("clusters: [1, 2")
    for path, message in ((tmp_path / "none", "kubeconfig not found"), (bad, "cannot")):
        out = subprocess.run(
            [*TIERRA, "serve", "--kubeconfig", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 2, out
        assert message in out.stderr and "Traceback" not in out.stderr


def test_serve_alone_looks_for_a_cluster_and_says_where_it_looked(tmp_path: Path) -> None:
    """No files, no --kubeconfig: the pod's service account, else $KUBECONFIG or
    ~/.kube/config; with none of them, exit 2 naming what was looked for."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": ""}
    out = subprocess.run(
        [*TIERRA, "serve"], capture_output=True, text=True, check=False, env=env, timeout=60
    )
    assert out.returncode == 2, out
    assert "no kubeconfig" in out.stderr and str(tmp_path / ".kube/config") in out.stderr
    assert "in-cluster service account" in out.stderr and "Traceback" not in out.stderr


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out = run("serve", str(CANONICAL), "--port", str(port))
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in out


def test_help_does_not_import_the_web_stack() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", *TIERRA[1:], "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "serve" in out.stdout
    imported = out.stderr
    assert "uvicorn" not in imported and "starlette" not in imported
