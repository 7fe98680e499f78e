"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

Several replicas run; the one holding the Lease does the work (binding, writing status)
and renews it every ``retry_period``. A candidate takes the Lease over only when it has
seen the same record unchanged for ``lease_duration`` by its *own* clock, so clock skew
between machines does not matter. Writes use the Lease's resourceVersion, so two
candidates racing for an expired Lease cannot both win (the loser gets 409).

A leader that cannot renew within ``renew_deadline`` stops leading: its work is cancelled
before the Lease can expire for the others, so there is never a moment with two leaders
working. On a clean stop the leader releases the Lease (empty holder), so a hand-over
after SIGTERM is immediate rather than a lease duration later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from tierra.kube.client import ApiError, Kube
from tierra.kube.resources import LEASES

log = logging.getLogger(__name__)


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Run ``lead()`` only while holding Lease ``namespace/name`` as ``identity``."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.is_leader = False
        self.transitions = 0  # times this candidate became leader
        self.leader_changed = asyncio.Event()  # set (and cleared by readers) on any change
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._holder = ""

    @property
    def holder(self) -> str:
        """The identity last seen holding the Lease ("" when none)."""
        return self._holder

    async def _read(self) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = await self.kube.get(
                LEASES.path(self.namespace, self.name), what=f"read Lease/{self.name}"
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return lease

    def _spec(self, old: dict[str, Any] | None, *, acquire: bool) -> dict[str, Any]:
        now = _micro_time()
        spec = dict((old or {}).get("spec") or {})
        transitions = int(spec.get("leaseTransitions") or 0)
        if acquire and spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            if old is not None:
                transitions += 1
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.lease_duration)),
            renewTime=now,
            leaseTransitions=transitions,
        )
        return spec

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this candidate holds the Lease afterwards."""
        lease = await self._read()
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None, acquire=True),
            }
            try:
                await self.kube.request(
                    "POST", LEASES.path(self.namespace), body=body, what="create Lease"
                )
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self._note("", "")
            self._holder = self.identity
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        self._holder = holder
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False  # someone else holds a lease that has not expired
        lease["spec"] = self._spec(lease, acquire=True)
        try:
            await self.kube.request(
                "PUT",
                LEASES.path(self.namespace, self.name),
                body=lease,
                what=f"update Lease/{self.name}",
            )
        except ApiError as exc:
            if exc.status == 409:  # another candidate wrote first
                return False
            raise
        self._holder = self.identity
        return True

    def _note(self, holder: str, renew: str) -> None:
        self._observed, self._observed_at = (holder, renew), time.monotonic()

    async def release(self) -> None:
        """Give the Lease up (empty holder) if this candidate holds it."""
        try:
            lease = await self._read()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"] = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": _micro_time(),
            }
            await self.kube.request(
                "PUT", LEASES.path(self.namespace, self.name), body=lease, what="release Lease"
            )
        except ApiError as exc:
            log.warning("could not release the Lease: %s", exc)

    def _set_leader(self, value: bool) -> None:
        if value != self.is_leader:
            self.is_leader = value
            if value:
                self.transitions += 1
            self.leader_changed.set()
            log.info(
                "%s %s Lease %s/%s",
                self.identity,
                "acquired" if value else "lost",
                self.namespace,
                self.name,
            )

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except ApiError as exc:
            log.warning("leader election: %s", exc)
            return False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Campaign forever; while leading, ``lead()`` runs and is cancelled on loss.

        Returns only when cancelled (then the Lease is released) or when ``lead()``
        returns by itself.
        """
        try:
            while True:
                while not await self._attempt():
                    await asyncio.sleep(self.retry_period)
                self._set_leader(True)
                work: asyncio.Task[None] = asyncio.create_task(lead(), name="leader-work")
                renewed_at = time.monotonic()
                try:
                    while not work.done():
                        done, _ = await asyncio.wait({work}, timeout=self.retry_period)
                        if done:
                            break
                        if await self._attempt():
                            renewed_at = time.monotonic()
                        elif time.monotonic() - renewed_at > self.renew_deadline:
                            break
                finally:
                    self._set_leader(False)
                    if not work.done():
                        work.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await work
                if work.done() and not work.cancelled():
                    work.result()  # re-raise what the work raised
                    return
        except asyncio.CancelledError:
            await asyncio.shield(self.release())
            raise
