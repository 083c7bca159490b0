"""A connection's two deadlines, kept by its process (docs/store-layout.md).

The store leases processes, not connections, and has no idle pass in its sweep: the process that
holds a connection sees its heartbeats and its activity, so it is the one that ends a connection
that stopped beating (``LEASE_TTL`` without a heartbeat: the browser is gone or stuck) and that
announces idle once the connection saw no activity for ``IDLE_AFTER`` (the store makes the user
idle only if no other device of theirs was active since; otherwise it asks again later, as the
other device may stop too). One timer a connection, re-armed when it fires, not on every beat.

Silence is counted in the process's own time: a heartbeat the process has received but not yet
handled is not the browser's fault. So the deadline waits while a frame of the connection is
being handled (its heartbeat may be queued behind a slow join), and a timer that fires late (the
process was descheduled, or busy with other sockets: the frames that came in meanwhile are still
unread) gives the connection the time it lost, once per heartbeat missed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from .. import conf, presence
from ..core import tenants
from ..core.tasks import spawn
from ..failopen import log_outage
from ..store import UNAVAILABLE

#: Seconds a deadline's timer may fire late before the lateness is taken for a stalled process.
LATE = 0.25


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
        self.due = 0.0  # when the timer was meant to fire
        self.busy = 0  # frames of the connection being handled
        self.forgiven: float | None = None  # the last beat whose lateness was given back
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

    @contextmanager
    def handling(self) -> Iterator[None]:
        """Around the handling of one of the connection's frames."""
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1

    def _arm(self, silent_at: float | None = None) -> None:
        """Arms the timer for the first deadline: silence (``silent_at``, once given time back,
        else a lease after the last beat) or idle."""
        self.stop()
        if silent_at is None:
            silent_at = self.last_beat + self.lease
        dues = [silent_at] if self.end is not None else []
        if self.idle_due is not None:
            dues.append(self.idle_due)
        if dues:
            self.due = min(dues)
            self.timer = self.loop.call_at(self.due, self._fire)

    def _fire(self) -> None:
        self.timer = None
        now = self.loop.time()
        late = now - self.due
        if self.session.closed:
            return
        if now >= self.last_beat + self.lease and self.end is not None:
            if self.busy:  # a beat may wait behind the frame in hand: look again shortly
                self._arm(now + min(1.0, self.lease / 4))
                return
            if late > LATE and self.forgiven != self.last_beat:
                self.forgiven = self.last_beat  # the stall given back, once per beat
                self._arm(now + late)
                return
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
