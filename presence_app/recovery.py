"""Taking a lost lease back: what a connection does when its heartbeats find no lease (Redis
restarted, the lease was swept after a long silence, or its keys were evicted), and when they
cannot be written (Redis away). Part of :class:`~presence_app.session.PresenceSession`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from . import dispatch, presence, protocol, tenants
from .coalescer import get_coalescer
from .protocol import FrameError
from .store import UNAVAILABLE, UnknownConnection
from .subscriptions import log_outage

logger = logging.getLogger("presence_app")


def spawn(tasks: set[asyncio.Task[None]], coro: Awaitable[None]) -> None:
    """Runs ``coro`` in the background, kept in ``tasks`` until it ends (so it can be cancelled);
    nobody awaits it, so an error is logged here, not at garbage collection."""

    async def logged() -> None:
        try:
            await coro
        except Exception:
            logger.exception("presence: a background task of a connection failed")

    task = asyncio.ensure_future(logged())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def in_tenant(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Runs a session's method in the session's tenant, whichever task calls it."""

    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with tenants.activate(self.tenant):
            return await method(self, *args, **kwargs)

    return run


class LeaseRecovery:
    """The coalescer's callbacks and the lease's recovery; the session gives the state
    (``closed``, ``lock``, ``tasks``, ``rooms``, ``own_state``, ``groups`` ...)."""

    closed: bool
    recover_retried: bool
    recovery_due: bool
    recovering: bool
    lock: asyncio.Lock
    tasks: set[asyncio.Task[None]]
    user: Any
    rooms: set[str]
    owed: set[str]
    watched: set[str]
    own_state: str
    user_id: str
    conn_id: str
    device: str | None
    tenant: str | None
    groups: Any
    outage_notice: Any
    send: Callable[[dict[str, Any]], Awaitable[None]]
    send_room_state: Callable[[str], Awaitable[None]]
    join: Callable[[str], Awaitable[None]]

    def lease_lost(self) -> None:
        if not self.closed:
            self.recovering = True
            spawn(self.tasks, self._recover())

    def finish_recovery(self) -> None:
        """A heartbeat came: a recovery Redis cut short is tried again. Once the lease is taken
        its heartbeats renew it and report nothing missing, so a room left unjoined (Redis
        refused the join a moment after it took the connect) would otherwise stay lost."""
        if self.recovery_due and not self.recovering:
            self.lease_lost()

    def owe(self, room: str) -> None:
        """A room the connection joins by itself (a permanent one) met an outage: the browser
        never asked for it, so it will not ask again. The recovery that the next heartbeat
        starts (:meth:`finish_recovery`) joins it once Redis answers."""
        self.owed.add(room)
        self.recovery_due = True

    def lease_unavailable(self) -> None:
        if not self.closed and self.outage_notice.ready():
            spawn(
                self.tasks,
                self.send(
                    protocol.error_frame(
                        "unavailable",
                        "presence is temporarily unavailable; retrying",
                        frame="heartbeat",
                    )
                ),
            )

    async def unavailable(self, exc: BaseException, **extra: Any) -> None:
        log_outage(exc)
        await self.send(
            protocol.error_frame(
                "unavailable", "presence is temporarily unavailable; try again", **extra
            )
        )

    @in_tenant
    async def _recover(self) -> None:
        """The lease is gone (Redis restarted, or a long silence got it swept): take it again,
        re-join the rooms and resend their state."""
        try:
            async with self.lock:
                if not self.closed:
                    await self._try_recover()
        finally:
            self.recovering = False

    async def _try_recover(self) -> None:
        try:
            await self._reassert()
            # Due until the browser has each room's state too: once the lease and the rooms are
            # back the heartbeats report nothing missing, so a state read Redis refused here
            # would otherwise never be sent (the browser would keep the members of before).
            self.recovery_due = True
            for room in sorted(self.rooms):
                await self.send_room_state(room)
            await self._join_owed()
            self.recovery_due = False
        except UNAVAILABLE as exc:
            # Redis answered a moment ago (it reported the lease missing), so this is most
            # likely a pooled connection that died with a Redis restart: check again with the
            # next flush, once; a lasting failure is retried by the heartbeats (finish_recovery).
            log_outage(exc)
            if not self.recover_retried:
                self.recover_retried = True
                get_coalescer().beat(self)
            self.lease_unavailable()
            return
        except UnknownConnection:
            # The lease vanished again between connect and join (keys evicted under memory
            # pressure): the next flush finds it missing and this runs once more.
            get_coalescer().beat(self)
            return
        self.recover_retried = False

    async def _reassert(self) -> None:
        """Takes the lease, the status and the rooms again (each change announced)."""
        self.recovery_due = True  # until the last room is joined again
        await self.groups.add_all(self.rooms, self.watched)
        if self.own_state in ("invisible", "dnd"):
            # A Redis restart lost the status with the rest: set it again first, so that an
            # invisible user's connect and joins below announce nothing (a no-op otherwise).
            await presence.aset_status(self.user_id, self.own_state)
        await presence.aconnect(self.conn_id, self.user_id, device=self.device)
        for room in sorted(self.rooms):
            # A connection taken again is let into its rooms again only as a new one would be.
            if not await presence.acan_join(self.user, room):
                await self.refused(room)
                continue
            await presence.ajoin(room, self.conn_id, self.user_id)
        self.recovery_due = False

    async def refused(self, room: str) -> None:
        """``CAN_JOIN`` no longer admits this connection to ``room``: out of it, browser told."""
        self.rooms.discard(room)
        await self.groups.discard([dispatch.room_group(room)])
        await self.send(
            protocol.error_frame(
                "forbidden", "You may no longer be in this room.", frame="join", room=room
            )
        )

    async def _join_owed(self) -> None:
        """Joins the rooms an outage kept this connection out of (:meth:`owe`), each with its
        ``CAN_JOIN`` and its state; a refusal other than the outage goes to the browser."""
        for room in sorted(self.owed):  # the recovery stays due until the last is joined
            try:
                await self.join(room)
            except FrameError as exc:
                await self.send(protocol.error_frame(exc.code, exc.detail, frame="join", room=room))
            self.owed.discard(room)

    async def _store_join(self, room: str) -> None:
        try:
            await presence.ajoin(room, self.conn_id, self.user_id)
        except UnknownConnection:  # the lease was lost before its heartbeat told us
            try:
                await self._reassert()
                await presence.ajoin(room, self.conn_id, self.user_id)
            except UnknownConnection as exc:
                # Lost again at once (swept while the process stalled): the next heartbeat
                # takes it back (recovery_due), and the browser asks again.
                raise FrameError("unavailable", "presence is temporarily unavailable") from exc
