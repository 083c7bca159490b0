"""A connection's two deadlines, kept by its process (docs/store-layout.md).

The store leases processes, not connections, and has no idle pass in its sweep: the process that
holds a connection sees its heartbeats and its activity, so it is the one that ends a connection
that stopped beating (``LEASE_TTL`` without a heartbeat: the browser is gone or stuck) and that
announces idle once the connection saw no activity for ``IDLE_AFTER`` (the store makes the user
idle only if no other device of theirs was active since; otherwise it asks again later, as the
other device may stop too). One timer a connection, re-armed when it fires, not on every beat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from .. import conf, presence
from ..core import tenants
from ..core.tasks import spawn
from ..failopen import log_outage
from ..store import UNAVAILABLE


class Owner(Protocol):
    """What the deadlines need of their session."""

    user_id: str
    tenant: str | None
    closed: bool
    tasks: set[asyncio.Task[None]]


class Liveness:
    """The deadlines of ``session``; ``end`` closes its transport (None: it never falls silent,
    as an SSE stream beats for itself)."""

    def __init__(self, session: Owner, end: Callable[[], Awaitable[None]] | None) -> None:
        s = conf.get_settings()
        self.session = session
        self.end = end
        self.lease = float(s["LEASE_TTL"])
        self.idle_after = float(s["IDLE_AFTER"])
        self.loop = asyncio.get_running_loop()
        self.last_beat = self.last_activity = self.loop.time()
        self.idle_due: float | None = self.last_activity + self.idle_after
        self.timer: asyncio.TimerHandle | None = None
        self._arm()

    def beat(self) -> None:
        self.last_beat = self.loop.time()

    def active(self) -> None:
        self.last_activity = self.loop.time()
        announced = self.idle_due is None
        self.idle_due = self.last_activity + self.idle_after
        if announced:  # idle is due again; otherwise the timer, when it fires, finds it later
            self._arm()

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _arm(self) -> None:
        self.stop()
        dues = [self.last_beat + self.lease] if self.end is not None else []
        if self.idle_due is not None:
            dues.append(self.idle_due)
        if dues:
            self.timer = self.loop.call_at(min(dues), self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        if self.session.closed:
            return
        if now >= self.last_beat + self.lease and self.end is not None:
            spawn(self.session.tasks, self.end())  # its close follows, as any close's
            return
        if self.idle_due is not None and now >= self.idle_due:
            self.idle_due = None
            spawn(self.session.tasks, self._idle())
        self._arm()

    async def _idle(self) -> None:
        try:
            with tenants.activate(self.session.tenant):
                made = await presence.aidle(self.session.user_id)
        except UNAVAILABLE as exc:
            log_outage(exc)
            made = []
        if not made and self.idle_due is None and not self.session.closed:
            # another device was active (or Redis away, or idle already): ask again later
            self.idle_due = self.loop.time() + self.idle_after
            self._arm()
