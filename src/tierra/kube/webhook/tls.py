"""Keeping the serving certificate current: in the Secret, in the server, in the caBundle.

``SelfManaged`` (the default) owns the certificates: every ``check_seconds`` it reads the
Secret, lets ``certs.ensure`` decide whether to renew, writes a renewal back with the
Secret's ``resourceVersion`` (two replicas renewing at once: the loser gets 409, reads
the winner's and uses it), patches the CA bundle into every webhook of the
ValidatingWebhookConfiguration *before* serving a certificate from a new CA, and loads the
certificate into the server.

``Provided`` (cert-manager, or any tool writing ``tls.crt``/``tls.key`` to the Secret)
only reads: the Secret is re-read every ``check_seconds`` and a new certificate loaded;
cert-manager's CA injector keeps the caBundle.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any

from tierra.kube.client import STRATEGIC_PATCH, ApiError, Kube
from tierra.kube.resources import SECRETS, VALIDATING_WEBHOOKS
from tierra.kube.webhook import certs
from tierra.kube.webhook.server import WebhookServer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    namespace: str
    secret: str
    webhook_configuration: str  # "" when someone else keeps the caBundle
    names: certs.Names


class NotYet(Exception):
    """The certificate someone else provides is not in the Secret yet."""


class SelfManaged:
    def __init__(self, kube: Kube, server: WebhookServer, target: Target) -> None:
        self.kube = kube
        self.server = server
        self.target = target
        self.bundle: certs.Bundle | None = None
        self.ca_patched = False
        self.last_error = ""

    async def _read(self) -> dict[str, Any]:
        t = self.target
        secret: dict[str, Any] = await self.kube.get(
            SECRETS.path(t.namespace, t.secret), what=f"read Secret {t.namespace}/{t.secret}"
        )
        return secret

    async def sync(self, now: dt.datetime | None = None) -> str:
        """One round; returns why a new bundle was made ("" when the stored one was kept)."""
        t = self.target
        for _ in range(3):
            secret = await self._read()
            stored = certs.Bundle.from_secret_data(secret.get("data"))
            bundle, why = certs.ensure(stored, t.names, now or dt.datetime.now(dt.UTC))
            if why:
                secret["data"] = bundle.to_secret_data()
                try:
                    await self.kube.request(
                        "PUT",
                        SECRETS.path(t.namespace, t.secret),
                        body=secret,
                        what=f"update Secret {t.namespace}/{t.secret}",
                    )
                except ApiError as exc:
                    if exc.status == 409:
                        continue  # another replica renewed first: use theirs
                    raise
                log.info("webhook certificate renewed: %s", why)
            await self._patch_ca(bundle)
            self._use(bundle)
            return why
        raise ApiError(409, "Conflict", "the Secret kept changing under three renewals", t.secret)

    async def _patch_ca(self, bundle: certs.Bundle) -> None:
        t = self.target
        if not t.webhook_configuration:
            return
        path = VALIDATING_WEBHOOKS.path(name=t.webhook_configuration)
        vwc = await self.kube.get(path, what=f"read {t.webhook_configuration}")
        want = base64.b64encode(bundle.ca_bundle).decode()
        hooks = [
            {"name": w["name"], "clientConfig": {"caBundle": want}}
            for w in vwc.get("webhooks") or []
            if (w.get("clientConfig") or {}).get("caBundle") != want
        ]
        if hooks:
            await self.kube.request(
                "PATCH",
                path,
                body={"webhooks": hooks},
                content_type=STRATEGIC_PATCH,
                what=f"patch caBundle of {t.webhook_configuration}",
            )
            log.info("caBundle written to %d webhook(s) of %s", len(hooks), t.webhook_configuration)
        self.ca_patched = True

    def _use(self, bundle: certs.Bundle) -> None:
        if self.bundle is None or (bundle.cert, bundle.key) != (self.bundle.cert, self.bundle.key):
            self.server.load(bundle.cert, bundle.key)
        self.bundle = bundle

    async def run(self, check_seconds: float) -> None:
        while True:
            try:
                await self.sync()
                self.last_error = ""
                delay = check_seconds
            except (ApiError, NotYet) as exc:
                self.last_error = str(exc)
                log.warning("webhook certificates: %s", exc)
                delay = min(check_seconds, 5.0)
            await asyncio.sleep(delay)


class Provided(SelfManaged):
    """Certificates written by someone else (cert-manager): read and loaded, never written."""

    async def sync(self, now: dt.datetime | None = None) -> str:
        data = dict((await self._read()).get("data") or {})
        data.setdefault(certs.CA_CRT, "")  # the API server's trust is cert-manager's business
        bundle = certs.Bundle.from_secret_data(data)
        if bundle is None:
            raise NotYet(f"Secret {self.target.secret} has no tls.crt and tls.key yet")
        self.ca_patched = True
        self._use(bundle)
        return ""
