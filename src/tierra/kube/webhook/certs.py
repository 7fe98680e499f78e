"""The webhook's own certificate authority and serving certificate, and when to renew them.

Pure (``cryptography`` only; the time is passed in). ``ensure`` takes what the Secret
holds (or nothing) and returns the bundle to use and, when it made a new one, why:

* no bundle, or one that cannot be read: a new CA and serving certificate;
* the serving certificate expires within ``SERVING_RENEW_BEFORE``, or lacks a name the
  webhook must answer to: a new serving certificate from the same CA (the API server's
  ``caBundle`` stays valid, so nothing else changes);
* the CA expires within ``CA_RENEW_BEFORE``: a new CA, whose certificate is put *in
  front of* the old one in ``ca.crt``; the old one stays there until it expires. The
  ValidatingWebhookConfiguration's ``caBundle`` is patched to that list before the new
  serving certificate is used, so the API server trusts both during the change.

Keys are ECDSA P-256: generated in milliseconds, accepted by every supported API server.
The Secret is ``kubernetes.io/tls`` with ``tls.crt``/``tls.key`` (serving), ``ca.crt``
(the trusted CAs, newest first) and ``ca.key`` (the newest CA's key, to sign renewals).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = dt.timedelta(days=365)
CA_RENEW_BEFORE = dt.timedelta(days=90)
SERVING_LIFETIME = dt.timedelta(days=90)
SERVING_RENEW_BEFORE = dt.timedelta(days=30)
_BACKDATE = dt.timedelta(minutes=5)  # clocks of the API server and the webhook differ

TLS_CRT, TLS_KEY, CA_CRT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"


@dataclass(frozen=True, slots=True)
class Bundle:
    """PEM bytes: the serving certificate and key, the trusted CAs, the signing CA key."""

    cert: bytes
    key: bytes
    ca_bundle: bytes  # newest CA first
    ca_key: bytes

    def to_secret_data(self) -> dict[str, str]:
        raw = {TLS_CRT: self.cert, TLS_KEY: self.key, CA_CRT: self.ca_bundle, CA_KEY: self.ca_key}
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}

    @classmethod
    def from_secret_data(cls, data: Mapping[str, str] | None) -> Bundle | None:
        """The bundle in a Secret's ``data``; None when a key is missing or not base64."""
        if not data:
            return None
        try:
            raw = {k: base64.b64decode(data[k], validate=True) for k in (TLS_CRT, TLS_KEY, CA_CRT)}
            ca_key = base64.b64decode(data.get(CA_KEY, ""), validate=True)
        except (KeyError, binascii.Error, TypeError):
            return None
        return cls(raw[TLS_CRT], raw[TLS_KEY], raw[CA_CRT], ca_key)

    @property
    def ca_certificates(self) -> list[x509.Certificate]:
        return x509.load_pem_x509_certificates(self.ca_bundle)

    @property
    def serving(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert)


@dataclass(frozen=True, slots=True)
class Names:
    """What the serving certificate must name: Service DNS names and, for tests, IPs."""

    dns: tuple[str, ...]
    ips: tuple[str, ...] = ()

    def general_names(self) -> list[x509.GeneralName]:
        out: list[x509.GeneralName] = [x509.DNSName(d) for d in self.dns]
        out += [x509.IPAddress(ipaddress.ip_address(i)) for i in self.ips]
        return out


def service_names(service: str, namespace: str, extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The names an in-cluster client may use for ``service`` in ``namespace``."""
    base = (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    )
    return tuple(dict.fromkeys((*base, *extra)))


def _utc(t: dt.datetime) -> dt.datetime:
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _new_ca(now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, f"tierra-webhook-ca-{now:%Y%m%d}")]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_serving(
    names: Names, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    first = (names.dns or names.ips or ("tierra-webhook",))[0]
    not_after = min(now + SERVING_LIFETIME, _utc(ca.not_valid_after_utc))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(names.general_names()), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def issue(
    names: Names,
    now: dt.datetime,
    *,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None,
    keep_cas: Sequence[x509.Certificate] = (),
) -> Bundle:
    """A serving certificate for ``names`` from ``ca`` (a new CA when None).

    ``keep_cas`` are older CAs still trusted; expired ones are dropped.
    """
    now = _utc(now)
    ca_cert, ca_key = ca if ca is not None else _new_ca(now)
    cert, key = _new_serving(names, ca_cert, ca_key, now)
    older = [
        c
        for c in keep_cas
        if c.fingerprint(hashes.SHA256()) != ca_cert.fingerprint(hashes.SHA256())
        and _utc(c.not_valid_after_utc) > now
    ]
    return Bundle(
        cert=_pem(cert),
        key=_key_pem(key),
        ca_bundle=b"".join(_pem(c) for c in (ca_cert, *older)),
        ca_key=_key_pem(ca_key),
    )


def _signing_ca(
    bundle: Bundle,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The CA in the bundle whose key the bundle holds (the newest), if it is sound."""
    try:
        key = serialization.load_pem_private_key(bundle.ca_key, password=None)
        cas = bundle.ca_certificates
    except ValueError:
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not cas:
        return None
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for c in cas:
        mine = c.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        if mine == public:
            return c, key
    return None


def _names_of(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    dns = set(san.get_values_for_type(x509.DNSName))
    ips = {str(i) for i in san.get_values_for_type(x509.IPAddress)}
    return dns, ips


def _serving_problem(bundle: Bundle, ca: x509.Certificate, names: Names, now: dt.datetime) -> str:
    try:
        cert = bundle.serving
        key = serialization.load_pem_private_key(bundle.key, password=None)
    except ValueError:
        return "the serving certificate or key cannot be read"
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return "the serving key does not belong to the serving certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the serving certificate was not issued by the signing CA"
    dns, ips = _names_of(cert)
    missing = sorted((set(names.dns) - dns) | (set(names.ips) - ips))
    if missing:
        return f"the serving certificate does not name {', '.join(missing)}"
    left = _utc(cert.not_valid_after_utc) - now
    if left < SERVING_RENEW_BEFORE:
        return f"the serving certificate expires in {_days(left)}"
    return ""


def _days(delta: dt.timedelta) -> str:
    return f"{delta.total_seconds() / 86400:.1f} days"


def ensure(bundle: Bundle | None, names: Names, now: dt.datetime) -> tuple[Bundle, str]:
    """The bundle to serve with, and why it was replaced ("" when ``bundle`` is kept)."""
    now = _utc(now)
    if bundle is None:
        return issue(names, now), "no certificate yet"
    signing = _signing_ca(bundle)
    if signing is None:
        return issue(names, now), "the stored CA cannot be read; made a new one"
    ca, _ = signing
    ca_left = _utc(ca.not_valid_after_utc) - now
    if ca_left < CA_RENEW_BEFORE:
        renewed = issue(names, now, keep_cas=bundle.ca_certificates)
        return (
            renewed,
            f"the CA expires in {_days(ca_left)}; made a new one (the old stays trusted)",
        )
    why = _serving_problem(bundle, ca, names, now)
    if why:
        return issue(names, now, ca=signing, keep_cas=bundle.ca_certificates), why
    return bundle, ""


def not_after(bundle: Bundle) -> dt.datetime:
    """When the serving certificate expires (for the metric and the renewal timer)."""
    return _utc(bundle.serving.not_valid_after_utc)
