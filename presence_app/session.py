"""One connection's presence, whatever carries it: a WebSocket today, any stream of events.

A :class:`PresenceSession` holds what a connection owns — its lease, the rooms it joined, the
users it watches, its channel-layer groups — and does what a connection does: open, beat (through
the process' coalescer), join, leave, set status, type, watch, recover a lost lease, close. It
speaks to the browser only through the ``send`` coroutine it is given, and to Redis only through
the front door (:mod:`presence_app.presence`). The WebSocket consumer and the consumer mixin
(:mod:`presence_app.consumers`) wrap it; :mod:`presence_app.frames` maps client frames onto it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from . import conf, dispatch, presence, protocol, rules
from .coalescer import get_coalescer
from .limits import Throttle
from .protocol import FrameError
from .store import UNAVAILABLE, UnknownConnection
from .subscriptions import Subscriptions, log_outage
from .sweeper import ensure_sweeper

logger = logging.getLogger("presence_app")

Send = Callable[[dict[str, Any]], Awaitable[None]]
#: How often a connection may warn its browser about an outage found in the background.
OUTAGE_NOTICE_INTERVAL = 30.0
def activity_interval(settings: dict[str, Any]) -> float:
    """How often a connection writes activity: often enough that idle is never announced wrongly."""
    return min(float(settings["TOUCH_INTERVAL"]), float(settings["IDLE_AFTER"]) / 2)


def _spawn(tasks: set[asyncio.Task[None]], coro: Awaitable[None]) -> None:
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


class PresenceSession:
    """The presence of one connection of ``user``; events go out through ``send``."""

    def __init__(self, user: Any, *, layer: Any, channel_name: str, send: Send,
                 device: str | None = None) -> None:
        s = conf.get_settings()
        self.user = user
        self.user_id = rules.user_id(user)
        # Short and random: it is part of every lease member in Redis.
        self.conn_id = secrets.token_urlsafe(9)
        self.layer = layer
        self.channel_name = channel_name
        self.send = send
        self.device = device
        self.rooms: set[str] = set()
        self.watched: set[str] = set()
        self.own_state = "online"
        self.closed = False
        self.recover_retried = False
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()
        self.activity_throttle = Throttle(activity_interval(s))
        self.typing_throttle = Throttle(s["TYPING_THROTTLE"], max_keys=s["MAX_ROOMS_PER_CONNECTION"])
        self.outage_notice = Throttle(OUTAGE_NOTICE_INTERVAL)
        self.groups = Subscriptions(layer, channel_name, self.user_id)

    # -- life --------------------------------------------------------------------------------
    async def open(self) -> dict[str, Any]:
        """Takes the lease and the groups; returns the ``hello`` frame to send first."""
        ensure_sweeper()
        s, me = conf.get_settings(), None
        try:
            await self.groups.add_all(self.rooms, self.watched)
            await presence.aconnect(self.conn_id, self.user_id, device=self.device)
            me = await presence.aget(self.user_id, viewer=self.user_id)
            self.own_state = me.state
        except UNAVAILABLE as exc:
            await self.unavailable(exc)  # no lease: the first heartbeat finds it missing
        return protocol.hello(self.user_id, me, s, activity_interval(s))

    async def close(self) -> None:
        """A clean close: the lease is cut to the grace; the rooms hear of it after that."""
        if self.closed:
            return
        self.closed = True
        get_coalescer().forget(self)
        for task in self.tasks:
            task.cancel()
        async with self.lock:
            try:
                await presence.adisconnect(self.conn_id, self.user_id)
            except UNAVAILABLE as exc:
                log_outage(exc)  # the lease then runs out by itself
            await self.groups.discard(self.groups.all(self.rooms, self.watched))

    # -- what a connection does (frames, REST calls) ------------------------------------------
    async def heartbeat(self) -> None:
        get_coalescer().beat(self)
        if self.groups.due():
            await self.groups.add_all(self.rooms, self.watched)

    async def activity(self) -> None:
        # Throttled per connection; the first activity after idle always passes (idle means
        # no write for IDLE_AFTER, which is longer than the throttle).
        if self.activity_throttle.ready():
            await presence.aactivity(self.user_id)

    async def join(self, room: str) -> None:
        room = rules.room(room)
        if room in self.rooms:
            await self.send_room_state(room)
            return
        limit = int(conf.get("MAX_ROOMS_PER_CONNECTION"))
        if len(self.rooms) >= limit:
            raise FrameError("limit", f"at most {limit} rooms a connection")
        if not await presence.acan_join(self.user, room):
            raise FrameError("forbidden", "you may not join this room")
        # Into the group before the snapshot is read: events queue behind it, none is missed.
        group = dispatch.room_group(room)
        await self.groups.add([group])
        try:
            await self._store_join(room)
        except BaseException:
            await self.groups.discard([group])
            raise
        self.rooms.add(room)
        await self.send_room_state(room)

    async def leave(self, room: str) -> None:
        room = rules.room(room)
        if room not in self.rooms:
            raise FrameError("not_joined", "this connection is not in that room")
        await presence.aleave(room, self.conn_id, self.user_id)
        self.rooms.discard(room)
        self.typing_throttle.forget(room)
        await self.groups.discard([dispatch.room_group(room)])

    async def set_status(self, **fields: Any) -> None:
        # The front door tells the user's own sockets (this one included) their true state.
        await presence.aset_status(self.user_id, **fields)

    async def typing(self, room: str) -> None:
        room = rules.room(room)
        if room not in self.rooms:
            raise FrameError("not_joined", "join the room before typing in it")
        # Ephemeral and best effort: throttled, never from an invisible user (a giveaway).
        if self.own_state != "invisible" and self.typing_throttle.ready(room):
            await dispatch.typing(self.layer, room, self.user_id, self.own_state, self.channel_name)

    async def watch(self, target: set[str], shown: list[str]) -> None:
        """Makes ``target`` the watch list, then sends the presence of ``shown``."""
        limit = int(conf.get("MAX_WATCHED_USERS"))
        if len(target) > limit:
            raise FrameError("limit", f"at most {limit} watched users a connection")
        added, removed = target - self.watched, self.watched - target
        # Counted before subscribing: a failure midway leaves a superset, which the next watch
        # or the close cleans up.
        self.watched |= added
        await self.groups.add([dispatch.watchers_group(u) for u in added])
        await self.groups.discard([dispatch.watchers_group(u) for u in removed])
        self.watched = target
        if shown:
            presences = await presence.aget_many(shown, viewer=self.user_id)
            await self.send({"type": "presence.state", "watch": True,
                             "members": [p.as_dict() for p in presences.values()]})

    async def send_room_state(self, room: str) -> None:
        ids = await presence.aroom_members(room)
        presences = await presence.aget_many(ids, viewer=self.user_id) if ids else {}
        await self.send({"type": "presence.state", "room": room,
                         "members": [p.as_dict() for p in presences.values()]})

    # -- events from the channel layer ----------------------------------------------------------
    async def event(self, event: dict[str, Any]) -> None:
        """Relays a ``presence.*`` group event to the browser."""
        if event.get("type") == "presence.typing":
            if event.get("sender") == self.channel_name:
                return  # not echoed to the typist
            event = {k: v for k, v in event.items() if k != "sender"}
        elif event.get("self"):
            self.own_state = event["state"]
        await self.send(event)

    # -- the coalescer's callbacks -------------------------------------------------------------
    def lease_lost(self) -> None:
        if not self.closed:
            _spawn(self.tasks, self._recover())

    def lease_unavailable(self) -> None:
        if not self.closed and self.outage_notice.ready():
            _spawn(self.tasks, self.send(protocol.error_frame(
                "unavailable", "presence is temporarily unavailable; retrying", frame="heartbeat")))

    async def unavailable(self, exc: BaseException, **extra: Any) -> None:
        log_outage(exc)
        await self.send(protocol.error_frame(
            "unavailable", "presence is temporarily unavailable; try again", **extra))

    # -- helpers -------------------------------------------------------------------------------
    async def _recover(self) -> None:
        """The lease is gone (Redis restarted, or a long silence got it swept): take it again,
        re-join the rooms and resend their state."""
        async with self.lock:
            if self.closed:
                return
            try:
                await self._reassert()
                for room in sorted(self.rooms):
                    await self.send_room_state(room)
            except UNAVAILABLE as exc:
                # Redis answered a moment ago (it reported the lease missing), so this is most
                # likely a pooled connection that died with a Redis restart: check again with
                # the next flush, once; a lasting failure waits for the heartbeats.
                log_outage(exc)
                if not self.recover_retried:
                    self.recover_retried = True
                    get_coalescer().beat(self)
                self.lease_unavailable()
                return
            self.recover_retried = False

    async def _reassert(self) -> None:
        """Takes the lease, the status and the rooms again (each change announced)."""
        await self.groups.add_all(self.rooms, self.watched)
        if self.own_state in ("invisible", "dnd"):
            # A Redis restart lost the status with the rest: set it again first, so that an
            # invisible user's connect and joins below announce nothing (a no-op otherwise).
            await presence.aset_status(self.user_id, self.own_state)
        await presence.aconnect(self.conn_id, self.user_id, device=self.device)
        for room in sorted(self.rooms):
            await presence.ajoin(room, self.conn_id, self.user_id)

    async def _store_join(self, room: str) -> None:
        try:
            await presence.ajoin(room, self.conn_id, self.user_id)
        except UnknownConnection:  # the lease was lost before its heartbeat told us
            await self._reassert()
            await presence.ajoin(room, self.conn_id, self.user_id)
