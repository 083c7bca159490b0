"""The presence WebSocket (``ws/presence/``): one consumer per browser tab or device.

The socket holds a lease in Redis (``connect``), renewed by heartbeat frames through the
process' :mod:`coalescer`; it joins rooms and watches users, and relays the events of those
groups to the browser. Every store change it makes returns transitions, which
:func:`~presence_app.dispatch.publish` sends to the groups and signals. Protocol: DESIGN.md and
:mod:`presence_app.protocol`. Bad frames get an ``error`` frame and change nothing; Redis being
away gets an ``unavailable`` error frame, never a crashed socket.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import iscoroutinefunction
from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils.module_loading import import_string

from . import conf, protocol
from .coalescer import get_coalescer
from .connection import get_async_store
from .dispatch import announce_self, publish, room_group, self_group, watchers_group
from .limits import Throttle, TokenBucket
from .protocol import FrameError
from .store import UNAVAILABLE, AsyncStore, InvalidInput, Transition, UnknownConnection
from .sweeper import ensure_sweeper

logger = logging.getLogger("presence_app")

CLOSE_UNAUTHENTICATED = 4401
CLOSE_TRY_AGAIN = 1013  # RFC 6455 "Try Again Later": the channel layer cannot be reached
#: How often a socket may warn its browser about a Redis outage found by the coalescer.
OUTAGE_NOTICE_INTERVAL = 30.0
#: Seconds between two tries of the channel layer's receive while Redis is away (first, most).
RECEIVE_RETRY = (0.1, 1.0)
_log_outage = Throttle(10.0)

Handler = Callable[["PresenceConsumer", dict[str, Any]], Awaitable[None]]
#: Channel-layer calls one socket makes at once (a watch list of 500 is 500 group_adds): each
#: takes a pooled Redis connection, and redis-py 8's pool fails past its size (100) at once.
GROUP_CALLS_AT_ONCE = 16


async def _bounded(calls: list[Awaitable[Any]], return_exceptions: bool = False) -> list[Any]:
    """asyncio.gather of ``calls``, at most GROUP_CALLS_AT_ONCE of them running at a time."""
    gate = asyncio.Semaphore(GROUP_CALLS_AT_ONCE)

    async def one(call: Awaitable[Any]) -> Any:
        async with gate:
            return await call

    return await asyncio.gather(*(one(c) for c in calls), return_exceptions=return_exceptions)


def activity_interval(settings: dict[str, Any]) -> float:
    """How often a socket writes activity: often enough that idle is never announced wrongly."""
    return min(float(settings["TOUCH_INTERVAL"]), float(settings["IDLE_AFTER"]) / 2)


def _device(scope: dict[str, Any]) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("device")
    text = re.sub(r"[^A-Za-z0-9 ._()/-]", "", values[0])[:64] if values else ""
    return text or None


class PresenceConsumer(AsyncJsonWebsocketConsumer):
    user_id: str | None = None  # None: refused (anonymous), nothing to clean up
    closed = False
    recover_retried = False

    @property
    def store(self) -> AsyncStore:
        return get_async_store()

    # -- lifecycle --------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except UNAVAILABLE as exc:
            # Before anything else Channels asks the layer for this socket's channel, and
            # channels-redis' pub/sub layer subscribes to it there: with Redis away that raises,
            # which the server would log as a traceback and answer with a 500, for every socket
            # a browser opens during the outage. Refuse it cleanly instead: 1013, "try again
            # later" (presence.js reconnects with backoff). Anything later is not ours to hide.
            if getattr(self, "channel_name", None) is not None:
                raise
            self._log(exc)
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN})

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept, then close: a close before the handshake reaches browsers as 1006, and
            # presence.js needs 4401 to know that reconnecting will not help.
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        s = conf.get_settings()
        self.user = user
        self.user_id = str(user.pk)
        # Short and random: it is part of every lease member in Redis.
        self.conn_id = secrets.token_urlsafe(9)
        self.device = _device(self.scope)
        self.rooms: set[str] = set()
        self.watched: set[str] = set()
        self.own_state = "online"
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()
        self.frames = TokenBucket(s["MAX_FRAMES_PER_SECOND"])
        self.activity = Throttle(activity_interval(s))
        self.typing = Throttle(s["TYPING_THROTTLE"], max_keys=s["MAX_ROOMS_PER_CONNECTION"])
        self.outage_notice = Throttle(OUTAGE_NOTICE_INTERVAL)
        # channels-redis forgets group members after group_expiry: re-add before that.
        self.group_refresh = float(getattr(self.channel_layer, "group_expiry", 86400)) / 2
        self.groups_at = 0.0
        await self.accept()
        ensure_sweeper()
        me, transitions = None, []
        try:
            await self._add_groups()
            transitions = await self.store.connect(self.conn_id, self.user_id, device=self.device)
            me = await self.store.get(self.user_id, viewer=self.user_id)
            self.own_state = me.state
        except UNAVAILABLE as exc:
            # No lease yet: the first heartbeat finds it missing and connects again.
            await self._unavailable(exc)
        await self.send_json(protocol.hello(self.user_id, me, s, activity_interval(s)))
        await publish(transitions)

    async def disconnect(self, code: int) -> None:
        if self.user_id is None or self.closed:
            return
        self.closed = True
        get_coalescer().forget(self)
        for task in self.tasks:
            task.cancel()
        async with self.lock:
            transitions: list[Transition] = []
            try:
                # The lease is cut to the grace: the rooms hear of it after that, via the sweep.
                transitions = await self.store.disconnect(self.conn_id, self.user_id)
            except UNAVAILABLE as exc:
                self._log(exc)  # the lease then runs out by itself
            await self._discard(
                [self_group(self.user_id)]
                + [room_group(r) for r in self.rooms]
                + [watchers_group(u) for u in self.watched]
            )
            await publish(transitions)

    # -- the channel layer's events for this socket --------------------------------------------
    # AsyncConsumer.__call__ sets ``channel_receive`` to the layer's receive of this socket's
    # channel and awaits it for every event. Unwrapped, a Redis outage ends every consumer with
    # an exception: one traceback and one abnormal close (1006) per socket, all at once. Here
    # the receive is retried until Redis is back, and the browser is told once per outage; the
    # socket stays open, and the next heartbeat after the outage takes its lease and rooms again.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._receive_event

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._layer_receive = receive

    async def _receive_event(self) -> dict[str, Any]:
        delay = RECEIVE_RETRY[0]
        while True:
            try:
                return await self._layer_receive()
            except UNAVAILABLE as exc:
                self._log(exc)
                if self.user_id is not None and not self.closed and self.outage_notice.ready():
                    await self.send_json(protocol.error_frame(
                        "unavailable", "live updates are interrupted; retrying"))
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, RECEIVE_RETRY[1])

    async def send_json(self, content: Any, close: bool = False) -> None:
        try:
            await super().send_json(content, close=close)
        except OSError:
            # The browser is gone (uvicorn's ClientDisconnected): there is nobody to tell. The
            # websocket.disconnect waiting in the queue runs disconnect(), which cleans up;
            # raising here would end the consumer before it, leaving its lease for LEASE_TTL
            # and its channel in its groups for the channel layer's group_expiry.
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before every message, a hop to its one
        # sync thread each: too dear for every heartbeat and room event. This consumer only
        # uses the database inside database_sync_to_async (CAN_JOIN), which does that itself.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            logger.debug("presence: no handler for %r", message.get("type"))
            return
        await handler(message)

    # -- frames from the browser ------------------------------------------------------------
    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None,
                      **kwargs: Any) -> None:
        if self.user_id is None or self.closed:
            return
        extra: dict[str, Any] = {}
        try:
            if not self.frames.take():
                raise FrameError("rate_limited",
                                 f"at most {conf.get('MAX_FRAMES_PER_SECOND')} frames a second")
            frame = protocol.parse(text_data, bytes_data, int(conf.get("MAX_FRAME_BYTES")))
            extra["frame"] = frame["type"]
            if isinstance(frame.get("room"), str):
                extra["room"] = frame["room"]  # fits: the frame passed the size limit
            handler = self.frame_handlers.get(frame["type"])
            if handler is None:
                raise FrameError("unknown_type", "unknown frame type")
            async with self.lock:
                await handler(self, frame)
        except FrameError as exc:
            extra.update(exc.extra)
            await self.send_json(protocol.error_frame(exc.code, exc.detail, **extra))
        except InvalidInput as exc:
            await self.send_json(protocol.error_frame("invalid", str(exc), **extra))
        except UNAVAILABLE as exc:
            await self._unavailable(exc, **extra)

    async def on_heartbeat(self, frame: dict[str, Any]) -> None:
        get_coalescer().beat(self)
        await self.send_json(protocol.HEARTBEAT_ACK)
        if asyncio.get_running_loop().time() - self.groups_at > self.group_refresh:
            await self._add_groups()

    async def on_activity(self, frame: dict[str, Any]) -> None:
        # Throttled per socket; the first activity after idle always passes (idle means no
        # write for IDLE_AFTER, which is longer than the throttle).
        if self.activity.ready():
            await publish(await self.store.activity(self.user_id))

    async def on_join(self, frame: dict[str, Any]) -> None:
        s = conf.get_settings()
        room = protocol.room_name(frame, s["ROOM_NAME_PATTERN"], int(s["MAX_ROOM_NAME_LENGTH"]))
        if room in self.rooms:
            await self._send_room_state(room)
            return
        if len(self.rooms) >= s["MAX_ROOMS_PER_CONNECTION"]:
            raise FrameError("limit", f"at most {s['MAX_ROOMS_PER_CONNECTION']} rooms a socket")
        if not await self._can_join(room):
            raise FrameError("forbidden", "you may not join this room")
        # Into the group before the snapshot is read: events queue behind it, none is missed.
        group = room_group(room)
        await self.channel_layer.group_add(group, self.channel_name)
        try:
            transitions = await self._store_join(room)
        except BaseException:
            await self._discard([group])
            raise
        self.rooms.add(room)
        # The others first: the joiner's snapshot costs two reads, and the join is in Redis
        # already (announced even if the snapshot then fails).
        await publish(transitions)
        await self._send_room_state(room)

    async def on_leave(self, frame: dict[str, Any]) -> None:
        s = conf.get_settings()
        room = protocol.room_name(frame, s["ROOM_NAME_PATTERN"], int(s["MAX_ROOM_NAME_LENGTH"]))
        if room not in self.rooms:
            raise FrameError("not_joined", "this socket is not in that room")
        transitions = await self.store.leave(room, self.conn_id, self.user_id)
        self.rooms.discard(room)
        self.typing.forget(room)
        await self._discard([room_group(room)])
        await publish(transitions)

    async def on_status(self, frame: dict[str, Any]) -> None:
        fields = protocol.status_fields(frame)
        transitions = await self.store.set_status(self.user_id, **fields)
        await publish(transitions)
        # The public events say "offline" for an invisible user: the user's own sockets learn
        # the truth on their private group (this socket included: it is the confirmation).
        await announce_self(await self.store.get(self.user_id, viewer=self.user_id),
                            layer=self.channel_layer)

    async def on_typing(self, frame: dict[str, Any]) -> None:
        s = conf.get_settings()
        room = protocol.room_name(frame, s["ROOM_NAME_PATTERN"], int(s["MAX_ROOM_NAME_LENGTH"]))
        if room not in self.rooms:
            raise FrameError("not_joined", "join the room before typing in it")
        # Ephemeral and best effort: throttled, and never from an invisible user (it would
        # give them away).
        if self.own_state == "invisible" or not self.typing.ready(room):
            return
        await self.channel_layer.group_send(room_group(room), {
            "type": "presence.typing",
            "user": self.user_id,
            "room": room,
            "state": "dnd" if self.own_state == "dnd" else "online",
            "sender": self.channel_name,
        })

    async def on_watch(self, frame: dict[str, Any]) -> None:
        """``users`` replaces the watch list, ``add`` / ``remove`` change it (for lists longer
        than one frame holds). Watched users' state comes back as a ``presence.state``."""
        if "users" in frame:
            ids = protocol.user_ids(frame, "users")
            target = set(ids)
        elif "add" in frame:
            ids = protocol.user_ids(frame, "add")
            target = self.watched | set(ids)
        elif "remove" in frame:
            ids = protocol.user_ids(frame, "remove")
            target, ids = self.watched - set(ids), []
        else:
            raise FrameError("invalid", 'a watch frame has "users", "add" or "remove"')
        limit = int(conf.get("MAX_WATCHED_USERS"))
        if len(target) > limit:
            raise FrameError("limit", f"at most {limit} watched users a socket")
        added, removed = target - self.watched, self.watched - target
        # Count what may be subscribed before subscribing: a failure midway leaves a superset,
        # which the next watch frame or the close cleans up.
        self.watched |= added
        await self._add([watchers_group(u) for u in added])
        await self._discard([watchers_group(u) for u in removed])
        self.watched = target
        if ids:
            presences = await self.store.get_many(ids, viewer=self.user_id)
            await self.send_json({"type": "presence.state", "watch": True,
                                  "members": [p.as_dict() for p in presences.values()]})

    frame_handlers: dict[str, Handler] = {
        "heartbeat": on_heartbeat,
        "activity": on_activity,
        "join": on_join,
        "leave": on_leave,
        "status": on_status,
        "typing": on_typing,
        "watch": on_watch,
    }

    # -- events from the channel layer ------------------------------------------------------
    async def presence_join(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    presence_leave = presence_join

    async def presence_update(self, event: dict[str, Any]) -> None:
        if event.get("self"):
            self.own_state = event["state"]
        await self.send_json(event)

    async def presence_typing(self, event: dict[str, Any]) -> None:
        if event.get("sender") != self.channel_name:
            await self.send_json({k: v for k, v in event.items() if k != "sender"})

    # -- the coalescer's callbacks ----------------------------------------------------------
    def lease_lost(self) -> None:
        if not self.closed:
            self._spawn(self._recover())

    def lease_unavailable(self) -> None:
        if not self.closed and self.outage_notice.ready():
            self._spawn(self.send_json(protocol.error_frame(
                "unavailable", "presence is temporarily unavailable; retrying", frame="heartbeat")))

    # -- helpers ----------------------------------------------------------------------------
    async def _recover(self) -> None:
        """The lease is gone (Redis restarted, or a long silence got it swept): take it again,
        re-join the rooms and resend their state."""
        async with self.lock:
            if self.closed:
                return
            try:
                transitions = await self._reassert()
                for room in sorted(self.rooms):
                    await self._send_room_state(room)
            except UNAVAILABLE as exc:
                # Redis answered a moment ago (it reported the lease missing), so this is most
                # likely a pooled connection that died with a Redis restart: check the lease
                # again with the next flush, not the next heartbeat (HEARTBEAT_INTERVAL away).
                # Once: a lasting failure waits for the heartbeats, as an outage does.
                self._log(exc)
                if not self.recover_retried:
                    self.recover_retried = True
                    get_coalescer().beat(self)
                self.lease_unavailable()
                return
            self.recover_retried = False
            await publish(transitions)

    async def _reassert(self) -> list[Transition]:
        await self._add_groups()
        transitions: list[Transition] = []
        if self.own_state in ("invisible", "dnd"):
            # A Redis restart lost the user's status with the rest: set it again first, so that
            # an invisible user's connect and joins below announce nothing to anybody (a no-op
            # when Redis still has it).
            transitions += await self.store.set_status(self.user_id, self.own_state)
        transitions += await self.store.connect(self.conn_id, self.user_id, device=self.device)
        for room in sorted(self.rooms):
            transitions += await self.store.join(room, self.conn_id, self.user_id)
        return transitions

    async def _store_join(self, room: str) -> list[Transition]:
        try:
            return await self.store.join(room, self.conn_id, self.user_id)
        except UnknownConnection:
            transitions = await self._reassert()
            return transitions + await self.store.join(room, self.conn_id, self.user_id)

    async def _send_room_state(self, room: str) -> None:
        ids = await self.store.room_members(room)
        presences = await self.store.get_many(ids, viewer=self.user_id) if ids else {}
        await self.send_json({"type": "presence.state", "room": room,
                              "members": [p.as_dict() for p in presences.values()]})

    async def _can_join(self, room: str) -> bool:
        hook = conf.get("CAN_JOIN")
        if hook is None:
            return True
        if isinstance(hook, str):
            hook = import_string(hook)
        if iscoroutinefunction(hook):
            return bool(await hook(self.user, room))
        return bool(await database_sync_to_async(hook)(self.user, room))

    async def _add_groups(self) -> None:
        self.groups_at = asyncio.get_running_loop().time()
        await self._add(
            [self_group(self.user_id)]
            + [room_group(r) for r in self.rooms]
            + [watchers_group(u) for u in self.watched]
        )

    async def _add(self, groups: list[str]) -> None:
        await _bounded([self.channel_layer.group_add(g, self.channel_name) for g in groups])

    async def _discard(self, groups: list[str]) -> None:
        results = await _bounded(
            [self.channel_layer.group_discard(g, self.channel_name) for g in groups],
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, UNAVAILABLE):
                self._log(result)  # a stale member costs a dropped message, and expires
            elif isinstance(result, BaseException):
                raise result

    async def _unavailable(self, exc: BaseException, **extra: Any) -> None:
        self._log(exc)
        await self.send_json(protocol.error_frame(
            "unavailable", "presence is temporarily unavailable; try again", **extra))

    def _log(self, exc: BaseException) -> None:
        if _log_outage.ready():
            logger.warning("presence: Redis or the channel layer is unavailable: %r", exc)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._background(coro))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @staticmethod
    async def _background(coro: Awaitable[None]) -> None:
        # Nobody awaits these tasks: an error is logged here, not as "Task exception was never
        # retrieved" at garbage collection.
        try:
            await coro
        except Exception:
            logger.exception("presence: a background task of a socket failed")
