"""UFM ports -> HyperNodes, and the client against a real HTTP(S) server on loopback.

The server serves the recorded response in fixtures/ufm (Volcano's mock data: no real
UFM capture is public) over plain HTTP and over HTTPS with a certificate made here.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from disc_helpers import by_name, children_of, nodes_of
from typer.testing import CliRunner

from tierra.cli import app
from tierra.discovery import LinkState, ParseError
from tierra.discovery.ufm import discover_ufm
from tierra.discovery.ufm_client import (
    PORTS_PATH,
    Credentials,
    UfmClient,
    UfmError,
    load_credentials,
)
from tierra.errors import InputError

USER, PASSWORD = "admin", "s3cret"


def mock_ports(fixtures: Path) -> str:
    return (fixtures / "ufm" / "volcano-mock-ufmRest-resources-ports.json").read_text()


def test_volcano_mock_groups_like_volcano(fixtures: Path) -> None:
    """Volcano's expectation for this data (ufm_test.go): nodes 0-3 each reach leaves 0-3,
    nodes 4-7 reach leaves 4-7: two leaf groups under one spine."""
    d = discover_ufm(mock_ports(fixtures), origin="mock")
    hns = by_name(d.hypernodes)
    assert sorted(hns) == ["ufm-t1-leaf0", "ufm-t1-leaf4", "ufm-t2-fabric"]
    assert nodes_of(hns["ufm-t1-leaf0"]) == ["node0", "node1", "node2", "node3"]
    assert nodes_of(hns["ufm-t1-leaf4"]) == ["node4", "node5", "node6", "node7"]
    assert children_of(hns["ufm-t2-fabric"]) == ["ufm-t1-leaf0", "ufm-t1-leaf4"]
    assert d.summary["links"] == 30  # 30 "Computer IB Port" entries


def test_truncated_and_garbled_responses(fixtures: Path) -> None:
    text = mock_ports(fixtures)
    pretty = json.dumps(json.loads(text), indent=1)  # one field per line
    with pytest.raises(ParseError) as err:
        discover_ufm(pretty[: len(pretty) // 2], origin="cut.json")
    assert err.value.line is not None and "cut.json" in str(err.value)
    ports = json.loads(text)
    del ports[5]["system_name"]
    bad = json.dumps(ports, indent=1)
    with pytest.raises(ParseError) as err:
        discover_ufm(bad, origin="bad.json")
    # element 5 starts on the line after the 5 elements of 7 lines each (+ "[")
    assert err.value.line == 2 + 5 * 7 and "ports[5].system_name" in str(err.value)
    with pytest.raises(ParseError, match="expected a JSON array"):
        discover_ufm('{"ports": []}', origin="obj.json")
    with pytest.raises(ParseError, match=r"empty\.json: line 1: the ports array is empty"):
        discover_ufm("[]\n", origin="empty.json")  # an empty desired set deletes everything


def test_switch_ports_give_real_tiers_and_down_links() -> None:
    """With switch ports, tiers come from switch-to-switch links, and a port that is not
    Active with a peer is a down link. (Built here from the field names of UFM's REST
    guide; it is a unit input, not a capture.)"""

    def port(system: str, desc: str, peer: str, name: str, state: str = "Active") -> dict[str, str]:
        return {
            "system_name": system,
            "description": desc,
            "peer_node_name": peer,
            "name": name,
            "active_speed": "NDR",
            "active_width": "4x",
            "logical_state": state,
        }

    ports = [
        port("h1", "Computer IB Port", "leaf-a", "h1_1"),
        port("h2", "Computer IB Port", "leaf-b", "h2_1"),
        port("h3", "Computer IB Port", "leaf-b", "h3_1", state="Down"),
        port("leaf-a", "Switch IB Port", "spine", "a_40"),
        port("leaf-b", "Switch IB Port", "spine", "b_40"),
        port("spine", "Switch IB Port", "", "s_9"),
    ]
    d = discover_ufm(json.dumps(ports), origin="unit")
    tiers = {h.name: h.tier for h in d.hypernodes}
    assert tiers == {"ufm-t1-leaf-a": 1, "ufm-t1-leaf-b": 1, "ufm-t2-spine": 2}
    (down,) = d.link_issues
    assert down.state is LinkState.DOWN and down.hosts == ("h3",)
    assert d.summary["unconnectedPorts"] == 1
    leaf = by_name(d.hypernodes)["ufm-t1-leaf-a"]
    assert leaf.link is not None and leaf.link.bandwidth_gbps == 50.0


# -- a real server on loopback ----------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    script: ClassVar[list[int]] = []  # status codes to answer before the body (per request)
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization", ""))
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.end_headers()
            return
        if self.path != PORTS_PATH:
            self.send_response(404)
            self.end_headers()
            return
        if type(self).script:
            self.send_response(type(self).script.pop(0))
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def server(fixtures: Path) -> Iterator[Callable[..., str]]:
    """Start servers on demand: ``server(tls_dir=None)`` -> base URL."""
    started: list[http.server.HTTPServer] = []

    def start(tls_dir: Path | None = None) -> str:
        handler = type(
            "H",
            (_Handler,),
            {"body": mock_ports(fixtures).encode(), "script": [], "seen": []},
        )
        httpd = http.server.HTTPServer(("127.0.0.1", 0), handler)
        scheme = "http"
        if tls_dir is not None:
            cert, key = _self_signed(tls_dir)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
            scheme = "https"
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        start.handler = handler  # type: ignore[attr-defined]
        return f"{scheme}://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def test_client_over_https_with_basic_auth(server: Callable[..., str], tmp_path: Path) -> None:
    url = server(tls_dir=tmp_path)
    creds = Credentials(USER, PASSWORD)
    with UfmClient(url, creds, verify=str(tmp_path / "cert.pem"), timeout=5) as client:
        d = discover_ufm(client.get_ports(), origin=client.ports_url)
    assert len(d.hypernodes) == 3
    with (
        pytest.raises(UfmError, match=r"SSL|certificate|CERTIFICATE"),
        UfmClient(url, creds, timeout=5, retries=0) as untrusted,
    ):
        untrusted.get_ports()  # the system trust store does not know our certificate
    with UfmClient(url, creds, verify=False, timeout=5) as insecure:
        assert insecure.get_ports().startswith("[")


def test_client_errors_and_retries(server: Callable[..., str]) -> None:
    url = server()
    handler = server.handler  # type: ignore[attr-defined]
    with (
        pytest.raises(UfmError, match="401: check the username and password"),
        UfmClient(url, Credentials(USER, "wrong"), timeout=5) as bad,
    ):
        bad.get_ports()
    sleeps: list[float] = []
    handler.script[:] = [503, 500]  # two transient failures, then the body
    with UfmClient(
        url, Credentials(USER, PASSWORD), timeout=5, backoff=0.5, sleep=sleeps.append
    ) as c:
        assert c.get_ports().startswith("[")
    assert sleeps == [0.5, 1.0]
    handler.script[:] = [503, 503, 503]
    with (
        pytest.raises(UfmError, match="HTTP 503"),
        UfmClient(url, Credentials(USER, PASSWORD), timeout=5, retries=2, sleep=sleeps.append) as c,
    ):
        c.get_ports()
    with (
        pytest.raises(UfmError, match="ConnectError"),
        UfmClient(
            "http://127.0.0.1:9",
            Credentials(USER, PASSWORD),
            timeout=2,
            retries=1,
            sleep=lambda s: None,
        ) as dead,
    ):
        dead.get_ports()


@pytest.mark.parametrize(("option", "value"), [("timeout", -1.0), ("timeout", float("nan"))])
def test_client_rejects_bad_timeout(option: str, value: float) -> None:
    # a negative timeout reached socket.settimeout and crashed with ValueError
    with pytest.raises(InputError, match=f"UFM {option} must be"):
        UfmClient("https://127.0.0.1:9", Credentials(USER, PASSWORD), **{option: value})


def test_client_rejects_negative_retries() -> None:
    with pytest.raises(InputError, match="UFM retries must be 0 or more, not -1"):
        UfmClient("https://127.0.0.1:9", Credentials(USER, PASSWORD), retries=-1)


def test_credentials_files(tmp_path: Path) -> None:
    plain = tmp_path / "creds"
    plain.write_text("admin:s3cret\n")
    assert load_credentials(plain) == Credentials("admin", "s3cret")
    secret = tmp_path / "secret.yaml"
    secret.write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: ufm-credentials}\ndata:\n"
        f"  username: {base64.b64encode(b'admin').decode()}\n"
        f"  password: {base64.b64encode(b's3cret').decode()}\n"
    )
    assert load_credentials(secret) == Credentials("admin", "s3cret")
    assert "s3cret" not in repr(load_credentials(secret))
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Secret\ndata:\n  username: '!!!'\n  password: x\n")
    with pytest.raises(InputError, match="not base64"):
        load_credentials(broken)


def test_cli_against_the_server(server: Callable[..., str], tmp_path: Path) -> None:
    url = server(tls_dir=tmp_path)
    creds = tmp_path / "creds"
    creds.write_text(f"{USER}:{PASSWORD}")
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "discover",
            "ufm",
            "--url",
            url,
            "--credentials",
            str(creds),
            "--ca-file",
            str(tmp_path / "cert.pem"),
            "-o",
            "json",
        ],
    )
    assert ok.exit_code == 0, ok.output
    items = json.loads(ok.stdout)["items"]
    assert sorted(i["metadata"]["name"] for i in items) == [
        "ufm-t1-leaf0",
        "ufm-t1-leaf4",
        "ufm-t2-fabric",
    ]
    creds.write_text(f"{USER}:nope")
    bad = runner.invoke(
        app, ["discover", "ufm", "--url", url, "--credentials", str(creds), "--insecure"]
    )
    assert bad.exit_code == 2 and "401" in bad.output and "Traceback" not in bad.output
