"""The UFM REST client: basic auth, TLS, timeouts, retries with backoff, a size cap.

Credentials come from a file, either ``username:password`` on one line (or the two on
two lines), a YAML/JSON mapping with ``username`` and ``password``, or a Kubernetes
``Secret`` manifest (``data`` base64-encoded, or ``stringData``) with those keys, as
Volcano's discoverer reads them from its Secret.

Transient failures (connection errors, timeouts, HTTP 429 and 5xx) are retried with
exponential backoff (``Retry-After`` honoured up to a cap); others fail at once with a
message saying what to check. ``sleep`` is injectable so tests do not wait.
"""

from __future__ import annotations

import base64
import binascii
import math
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tierra.api.files import read_text
from tierra.errors import InputError, TierraError

PORTS_PATH = "/ufmRest/resources/ports"
MAX_BYTES = 100 << 20
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 30.0


class UfmError(TierraError):
    """The UFM server could not be asked (unreachable, refused, bad answer)."""


@dataclass(frozen=True, slots=True)
class Credentials:
    username: str
    password: str = field(repr=False)


def load_credentials(path: str | Path) -> Credentials:
    """Read credentials from a file (see the module docstring); ``InputError`` if unusable."""
    name = str(path)
    text = read_text(path, expected="a credentials file")
    stripped = text.strip()
    data: Any = None
    if stripped.startswith(("{", "apiVersion", "kind", "username", "data", "stringData")):
        try:
            data = yaml.safe_load(stripped)
        except yaml.YAMLError:
            data = None
    if isinstance(data, Mapping):
        return _from_mapping(data, name)
    lines = [ln for ln in stripped.splitlines() if ln.strip()]
    if len(lines) == 1 and ":" in lines[0]:
        user, _, password = lines[0].partition(":")
        return _checked(user.strip(), password.strip(), name)
    if len(lines) == 2:
        return _checked(lines[0].strip(), lines[1].strip(), name)
    raise InputError(
        f"{name}: expected 'username:password', a username and a password on two lines, "
        "or a Secret with username and password"
    )


def credentials_from_mapping(data: Mapping[str, Any], name: str) -> Credentials:
    """Credentials from a Secret object (as the API returns it) or a plain mapping;
    ``name`` says where they came from in the error when one is missing."""
    return _from_mapping(data, name)


def _from_mapping(data: Mapping[str, Any], name: str) -> Credentials:
    if data.get("kind") == "Secret":
        string_data = data.get("stringData") or {}
        encoded = data.get("data") or {}
        values: dict[str, str] = {}
        for key in ("username", "password"):
            if key in string_data:
                values[key] = str(string_data[key])
            elif key in encoded:
                try:
                    values[key] = base64.b64decode(str(encoded[key]), validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    raise InputError(f"{name}: Secret data.{key} is not base64 text") from None
        return _checked(values.get("username", ""), values.get("password", ""), name)
    return _checked(str(data.get("username", "")), str(data.get("password", "")), name)


def _checked(user: str, password: str, name: str) -> Credentials:
    if not user or not password:
        raise InputError(f"{name}: both a username and a password are needed")
    return Credentials(user, password)


class UfmClient:
    """Talks to one UFM server; ``get_ports()`` returns the ports resource as text."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 1.0,
        verify: bool | str = True,  # False: no TLS check; a path: trust that CA bundle
        max_bytes: int = MAX_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not endpoint.strip():
            raise InputError("UFM endpoint is empty")
        if not 0 < timeout < math.inf:  # socket.settimeout raises ValueError otherwise
            raise InputError(f"UFM timeout must be a positive number of seconds, not {timeout}")
        if retries < 0:
            raise InputError(f"UFM retries must be 0 or more, not {retries}")
        if "://" not in endpoint:
            endpoint = f"https://{endpoint}"  # as Volcano's discoverer does
        self.endpoint = endpoint.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.max_bytes = max_bytes
        self.sleep = sleep
        tls: bool | ssl.SSLContext = verify if isinstance(verify, bool) else _ca_context(verify)
        self._client = httpx.Client(
            auth=httpx.BasicAuth(credentials.username, credentials.password),
            timeout=httpx.Timeout(timeout),
            verify=tls,
            transport=transport,
            headers={"Accept": "application/json"},
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> UfmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ports_url(self) -> str:
        return f"{self.endpoint}{PORTS_PATH}"

    def get_ports(self) -> str:
        return self.get(PORTS_PATH)

    def get(self, path: str) -> str:
        url = f"{self.endpoint}{path}"
        attempt = 0
        while True:
            try:
                status, body, retry_after = self._fetch(url)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise UfmError(
                        f"{url}: {type(exc).__name__}: {exc or 'no answer'}"
                        f" (after {attempt + 1} attempt(s))"
                    ) from None
            else:
                if status == 200:
                    return body
                if status not in RETRY_STATUS or attempt >= self.retries:
                    raise UfmError(f"{url}: {_explain(status)}")
                if retry_after is not None:
                    self.sleep(min(retry_after, MAX_RETRY_AFTER))
                    attempt += 1
                    continue
            self.sleep(self.backoff * (2**attempt))
            attempt += 1

    def _fetch(self, url: str) -> tuple[int, str, float | None]:
        with self._client.stream("GET", url) as response:
            if response.status_code != 200:
                return response.status_code, "", _retry_after(response)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise UfmError(f"{url}: response larger than {self.max_bytes} bytes")
                chunks.append(chunk)
        try:
            return 200, b"".join(chunks).decode("utf-8"), None
        except UnicodeDecodeError:
            raise UfmError(f"{url}: response is not UTF-8 text") from None


def _ca_context(ca_file: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise InputError(f"{ca_file}: cannot use as a CA bundle: {exc}") from None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _explain(status: int) -> str:
    hint = {
        401: "check the username and password",
        403: "the user may not read this resource",
        404: "is this a UFM server? (no /ufmRest/resources/ports)",
    }.get(status, "")
    text = f"HTTP {status}"
    return f"{text}: {hint}" if hint else text
