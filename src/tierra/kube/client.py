"""The one place that knows how tierra talks to an API server: auth, TLS, limits, errors.

Everything in ``tierra.kube`` goes through :class:`Kube`. It wraps a kubernetes_asyncio
``ApiClient`` for what that client does well (kubeconfig and in-cluster loading, bearer
tokens and exec plugins, client certificates, TLS) and bypasses its generated models:
responses are read raw and decoded with msgspec, because decoding every pod into the
generated classes costs more CPU than the API server spends serving it, and the generated
binding call raises after a *successful* bind (the server answers with a ``Status`` where
the OpenAPI spec promises a ``Binding``; kubernetes-client/python#547).

Limits live here too. The Python client has no client-side rate limit and aiohttp's pool
is shared by long-lived watches, so ``Kube`` keeps watches on their own connections and
bounds the other requests in flight (and, if asked, their rate): an unbounded burst only
queues inside the API server's priority-and-fairness layer and is measured as slowness.

Errors are one type, :class:`ApiError`: ``status`` is the HTTP status, or 0 when the
server could not be reached at all, so callers can tell "refused" from "away".
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import ApiClient, Configuration

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
RETRYABLE = frozenset({0, 429, 502, 503, 504})
_decoder = msgspec.json.Decoder()


class KubeConfigError(Exception):
    """No usable cluster configuration: the message says what was looked for."""


class ApiError(Exception):
    """The API server refused a request (``status`` and ``reason`` are its words), or could
    not be reached (``status`` 0, ``reason`` "Unavailable")."""

    def __init__(self, status: int, reason: str, message: str, what: str) -> None:
        super().__init__(
            f"{what}: HTTP {status} {reason}: {message}"
            if status
            else f"{what}: API server unavailable: {message}"
        )
        self.status = status
        self.reason = reason
        self.message = message
        self.what = what

    @property
    def retryable(self) -> bool:
        """Worth trying again unchanged: unreachable, throttled or a gateway problem.

        A 500 is not: the API server answers an invalid binding target with 500
        (kubernetes#139488), and retrying that forever helps nobody.
        """
        return self.status in RETRYABLE


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How hard tierra may push one API server.

    ``max_in_flight`` bounds concurrent ordinary requests; watches get ``watches`` extra
    connections so a flood of binds can never starve them. ``qps`` (0: no limit) and
    ``burst`` add a token bucket in front, like client-go's ``--kube-api-qps``.
    """

    max_in_flight: int = 64
    watches: int = 16
    qps: float = 0.0
    burst: int = 0
    timeout: float = 30.0


class _TokenBucket:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.capacity = float(max(burst, 1))
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    async def take(self) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.qps)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.qps)


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # a pod's token, CA


def _environment_configures_http() -> bool:
    """Whether proxy variables or a netrc file could change a request (aiohttp's
    ``trust_env``); a proxy set in the kubeconfig is used either way."""
    names = {k.lower() for k, v in os.environ.items() if v}
    if names & {"http_proxy", "https_proxy", "all_proxy", "ws_proxy", "wss_proxy", "netrc"}:
        return True
    return (Path.home() / ".netrc").is_file()


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").is_file()


async def load_configuration(
    kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> Configuration:
    """The cluster configuration: ``kubeconfig`` if given, else in-cluster, else
    ``$KUBECONFIG`` or ``~/.kube/config``. Raises KubeConfigError naming what was tried."""
    configuration = Configuration()
    if kubeconfig is None and _in_cluster():
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(SERVICE_ACCOUNT / "token"),
                cert_filename=str(SERVICE_ACCOUNT / "ca.crt"),
            )
        except k8s_config.ConfigException as exc:
            raise KubeConfigError(f"in-cluster configuration: {exc}") from None
        return configuration
    if kubeconfig is None:
        env = os.environ.get("KUBECONFIG", "")
        candidates = [p for p in env.split(os.pathsep) if p] or [str(Path.home() / ".kube/config")]
        existing = [p for p in candidates if Path(p).is_file()]
        if not existing:
            raise KubeConfigError(
                "no kubeconfig: give --kubeconfig FILE, set KUBECONFIG, or run in a pod "
                f"(looked for {', '.join(candidates)} and the in-cluster service account)"
            )
        kubeconfig = existing[0]
    path = Path(kubeconfig)
    if not path.is_file():
        raise KubeConfigError(f"{path}: kubeconfig not found")
    try:
        await k8s_config.load_kube_config(
            config_file=str(path), context=context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise KubeConfigError(f"{path}: cannot use this kubeconfig: {exc}") from None
    except Exception as exc:  # the YAML parser's errors and the like
        raise KubeConfigError(f"{path}: cannot read this kubeconfig: {exc}") from None
    return configuration


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in (params or {}).items():
        if v is None:
            continue
        out.append((k, ("true" if v else "false") if isinstance(v, bool) else str(v)))
    return out


def decode_json(body: bytes) -> Any:
    """JSON bytes to plain Python values (msgspec: several times faster than ``json``)."""
    return _decoder.decode(body)


def _status_error(status: int, http_reason: str, body: bytes, what: str) -> ApiError:
    reason, message = http_reason, body.decode(errors="replace")[:2000]
    try:
        doc = decode_json(body)
        if isinstance(doc, dict):
            reason = str(doc.get("reason") or reason)
            message = str(doc.get("message") or message)
    except msgspec.DecodeError:
        pass
    return ApiError(status, reason, message, what)


TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


class Kube:
    """A connection to one API server; create inside a running event loop, then close."""

    def __init__(self, configuration: Configuration, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        configuration.connection_pool_maxsize = self.limits.max_in_flight + self.limits.watches
        self.configuration = configuration
        self.api_client: Any = ApiClient(configuration)
        if not _environment_configures_http():
            # kubernetes_asyncio's session trusts the environment, so aiohttp looks for
            # ~/.netrc and the proxy variables on every request, each in a worker thread:
            # two thread hops per binding, a fifth of the scheduler's CPU while binding.
            self.api_client.rest_client.pool_manager._trust_env = False
        self._in_flight = asyncio.Semaphore(self.limits.max_in_flight)
        self._bucket = (
            _TokenBucket(self.limits.qps, self.limits.burst or int(self.limits.qps) or 1)
            if self.limits.qps > 0
            else None
        )

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        limits: Limits | None = None,
    ) -> Kube:
        return cls(await load_configuration(kubeconfig, context=context), limits)

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    async def close(self) -> None:
        await self.api_client.close()

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _send(
        self,
        method: str,
        *,
        path: str,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        timeout: Any,
    ) -> Any:
        headers = {"Accept": JSON, "Content-Type": content_type}
        return await self.api_client.call_api(
            path,
            method,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        what: str = "",
        timeout: float | None = None,
    ) -> Any:
        """One request; the decoded JSON body, or ApiError (status 0: unreachable)."""
        data = await self.request_bytes(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            what=what,
            timeout=timeout,
        )
        return decode_json(data) if data else None

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        what: str = "",
        timeout: float | None = None,
    ) -> bytes:
        """One request; the body as sent (for a typed decoder, ``tierra.kube.wire``)."""
        what = what or f"{method} {path}"
        if self._bucket is not None:
            await self._bucket.take()
        async with self._in_flight:
            try:
                response = await self._send(
                    method,
                    path=path,
                    query=_query(query),
                    body=body,
                    content_type=content_type,
                    timeout=timeout if timeout is not None else self.limits.timeout,
                )
                try:
                    data = await response.read()
                finally:
                    response.release()
            except TRANSPORT_ERRORS as exc:
                raise ApiError(0, "Unavailable", str(exc) or type(exc).__name__, what) from exc
        if 200 <= response.status < 300:
            out: bytes = data
            return out
        raise _status_error(response.status, str(response.reason), data, what)

    async def get(
        self, path: str, *, query: Mapping[str, Any] | None = None, what: str = ""
    ) -> Any:
        return await self.request("GET", path, query=query, what=what)

    @asynccontextmanager
    async def stream(
        self, path: str, *, query: Mapping[str, Any], read_timeout: float, what: str = ""
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """A streaming GET (a watch): yields the body's reader, one JSON event per line.

        Not counted against ``max_in_flight``: watches live for minutes.
        """
        what = what or f"watch {path}"
        timeout = aiohttp.ClientTimeout(sock_connect=10, sock_read=read_timeout)
        try:
            response = await self._send(
                "GET", path=path, query=_query(query), body=None, content_type=JSON, timeout=timeout
            )
        except TRANSPORT_ERRORS as exc:
            raise ApiError(0, "Unavailable", str(exc) or type(exc).__name__, what) from exc
        try:
            if not 200 <= response.status < 300:
                try:
                    data = await response.read()
                except TRANSPORT_ERRORS:
                    data = b""
                raise _status_error(response.status, str(response.reason), data, what)
            yield response.content
        finally:
            response.release()
