"""The webhook's HTTPS endpoint over real TLS: reviews answered, garbage refused, and a
rotated certificate served from the next connection on without closing the port."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from webhook_helpers import admission_review, canonical, hn, judge_with

from tierra.kube.webhook import certs, review
from tierra.kube.webhook.admission import Judge
from tierra.kube.webhook.server import WebhookServer

NAMES = certs.Names(("localhost",), ("127.0.0.1",))


async def post(port: int, ca: bytes, path: str, body: bytes) -> tuple[int, Any]:
    """POST over TLS trusting only ``ca``; returns the status and the JSON (or None)."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://127.0.0.1:{port}{path}", data=body, ssl=ctx) as resp,
    ):
        text = await resp.read()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, None


async def peer_certificate(port: int, ca: bytes) -> bytes:
    """The DER certificate a fresh TLS connection is shown (verified against ``ca``)."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(True)
        return der
    finally:
        writer.close()
        await writer.wait_closed()


def test_reviews_over_tls_and_rotation_in_place(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []

    async def main() -> None:
        bundle, _ = certs.ensure(None, NAMES, dt.datetime.now(dt.UTC))
        server = WebhookServer(
            judge_with(canonical()),
            host="127.0.0.1",
            port=0,
            cert_dir=tmp_path / "tls",
            observe=lambda kind, allowed, _s: seen.append((kind, allowed)),
        )
        server.load(bundle.cert, bundle.key)
        await server.start()
        try:
            first_cert = await peer_certificate(server.port, bundle.ca_bundle)
            status, doc = await post(
                server.port,
                bundle.ca_bundle,
                "/validate/hypernodes",
                admission_review(hn("s0", 1, children=("s6",))),
            )
            assert status == 200
            assert doc["apiVersion"] == review.API_VERSION
            assert doc["response"]["allowed"] is False
            assert "membership forms a cycle" in doc["response"]["status"]["message"]

            status, _ = await post(server.port, bundle.ca_bundle, "/validate/podgroups", b"{}")
            assert status == 400

            # Rotate: a new serving certificate from the same CA is served on new connections.
            more = certs.Names(("localhost", "tierra-webhook.local"), NAMES.ips)
            renewed, why = certs.ensure(bundle, more, dt.datetime.now(dt.UTC))
            assert why and renewed.ca_bundle == bundle.ca_bundle
            server.load(renewed.cert, renewed.key)
            second_cert = await peer_certificate(server.port, bundle.ca_bundle)
            status, doc = await post(
                server.port,
                bundle.ca_bundle,
                "/validate/hypernodes",
                admission_review(hn("s9", 1, nodes=("n9",))),
            )
            assert status == 200 and doc["response"]["allowed"] is True
            assert first_cert != second_cert
        finally:
            await server.stop()

    asyncio.run(main())
    assert seen == [("HyperNode", False), ("HyperNode", True)]
    assert (tmp_path / "tls" / "tls.key").stat().st_mode & 0o077 == 0


def test_start_without_a_certificate_is_refused() -> None:
    async def main() -> None:
        server = WebhookServer(Judge(), host="127.0.0.1", port=0)
        with pytest.raises(RuntimeError, match="no certificate"):
            await server.start()

    asyncio.run(main())
