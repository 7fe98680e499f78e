"""The webhook's certificates: made, kept, renewed before they expire, read back from a
Secret, and trusted by a real TLS handshake."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from tierra.kube.webhook import certs

NOW = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
NAMES = certs.Names(certs.service_names("tierra-webhook", "tierra-system"), ("127.0.0.1",))


def san(bundle: certs.Bundle) -> list[str]:
    ext = bundle.serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [
        *ext.get_values_for_type(x509.DNSName),
        *map(str, ext.get_values_for_type(x509.IPAddress)),
    ]


def test_a_new_bundle_names_the_service_and_is_kept_while_valid() -> None:
    bundle, why = certs.ensure(None, NAMES, NOW)
    assert why == "no certificate yet"
    assert "tierra-webhook.tierra-system.svc" in san(bundle)
    assert "127.0.0.1" in san(bundle)
    bundle.serving.verify_directly_issued_by(bundle.ca_certificates[0])
    again, why = certs.ensure(bundle, NAMES, NOW + dt.timedelta(days=30))
    assert (again, why) == (bundle, "")


def test_serving_certificate_is_renewed_from_the_same_ca() -> None:
    bundle, _ = certs.ensure(None, NAMES, NOW)
    later = NOW + certs.SERVING_LIFETIME - certs.SERVING_RENEW_BEFORE + dt.timedelta(hours=1)
    renewed, why = certs.ensure(bundle, NAMES, later)
    assert "serving certificate expires in" in why
    assert renewed.ca_bundle == bundle.ca_bundle  # the API server's caBundle stays valid
    assert renewed.cert != bundle.cert
    assert certs.not_after(renewed) > certs.not_after(bundle)


def test_a_new_name_gets_a_new_certificate() -> None:
    bundle, _ = certs.ensure(None, NAMES, NOW)
    more = certs.Names((*NAMES.dns, "webhook.example.org"), NAMES.ips)
    renewed, why = certs.ensure(bundle, more, NOW)
    assert why == "the serving certificate does not name webhook.example.org"
    assert "webhook.example.org" in san(renewed)


def test_ca_renewal_keeps_the_old_ca_trusted_until_it_expires() -> None:
    bundle, _ = certs.ensure(None, NAMES, NOW)
    late = NOW + certs.CA_LIFETIME - certs.CA_RENEW_BEFORE + dt.timedelta(days=1)
    renewed, why = certs.ensure(bundle, NAMES, late)
    assert "the CA expires in" in why
    cas = renewed.ca_certificates
    assert len(cas) == 2
    assert cas[1] == bundle.ca_certificates[0]
    renewed.serving.verify_directly_issued_by(cas[0])
    # Once the old CA has expired, the next renewal drops it.
    after = NOW + certs.CA_LIFETIME + dt.timedelta(days=1)
    final, why = certs.ensure(renewed, NAMES, after)
    assert why and len(final.ca_certificates) == 1


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"tls.crt": "!!", "tls.key": "", "ca.crt": ""},
        {"tls.crt": "YQ==", "tls.key": "YQ==", "ca.crt": "YQ==", "ca.key": "YQ=="},
    ],
    ids=["none", "empty", "not-base64", "not-pem"],
)
def test_an_unreadable_secret_is_replaced(data: dict[str, str] | None) -> None:
    bundle = certs.Bundle.from_secret_data(data)
    fresh, why = certs.ensure(bundle, NAMES, NOW)
    assert why
    fresh.serving.verify_directly_issued_by(fresh.ca_certificates[0])


def test_secret_round_trip() -> None:
    bundle, _ = certs.ensure(None, NAMES, NOW)
    assert certs.Bundle.from_secret_data(bundle.to_secret_data()) == bundle


def test_a_client_trusting_ca_crt_completes_a_handshake(tmp_path: Path) -> None:
    bundle, _ = certs.ensure(None, NAMES, dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(bundle.cert)
    (tmp_path / "tls.key").write_bytes(bundle.key)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_ctx = ssl.create_default_context(cadata=bundle.ca_bundle.decode())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")

        thread = threading.Thread(target=serve)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client_ctx.wrap_socket(raw, server_hostname="tierra-webhook.tierra-system.svc") as tls,
        ):
            assert tls.recv(2) == b"ok"
        thread.join(5)
