"""Where transitions go: channel-layer groups (to browsers) and Django signals (to Python code).

The store returns the :class:`~presence_app.store.Transition` list of every change it made; the
code that made the change hands it to :func:`apublish` (async) or :func:`publish`, so every
transition is announced exactly once, by the process that observed it:

- ``join`` / ``leave`` go to the room's group;
- ``online`` / ``offline`` / ``update`` go to the user's watchers and to each of ``t.rooms``;
- a room's group is listened to by one channel per process (``realtime.feeds``), not by each
  socket: the process decodes a room event once and hands it to its sockets in the room;
- ``online`` / ``offline`` / ``update`` also fire ``user_online`` / ``user_offline`` /
  ``status_changed`` (see :mod:`presence_app.signals`).

Group names are hashes, never user text: channel-layer names allow only ASCII alnum, ``-_.`` and
fewer than 100 characters, and a room may be called anything the room pattern admits.

Sync code (a view, a task, a management command) has no event loop, and ``async_to_sync`` made
one a call, with the channel layer's connections for it (~5 ms a write that announces). So the
sync twins send without one: on channels-redis' pub/sub layer, the ``PUBLISH`` its own
``group_send`` would make, from a redis-py client of the same host (all of a call's in one
round trip); on its ``RedisChannelLayer``, on one long-lived loop in a thread of this process
(:class:`_Loop`); on any other layer, and from sync code an event loop runs (``sync_to_async``
in an ASGI process), through ``async_to_sync`` as before. Signals fire in the calling thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.utils.crypto import salted_hmac

from .. import conf, signals
from ..store import UNAVAILABLE, Presence, Transition
from . import tenants
from .limits import Throttle

logger = logging.getLogger("presence_app")

#: Groups written to at once; events of one group are always sent in order.
GROUP_CONCURRENCY = 32
#: A channel-layer outage fails every group: one warning per this many seconds.
_log_failure = Throttle(10.0)

SIGNALS = {
    "online": signals.user_online,
    "offline": signals.user_offline,
    "update": signals.status_changed,
}


def _group(kind: str, value: str) -> str:
    # The key prefix keeps two apps (or test runs), and two tenants, on one channel layer apart.
    text = f"{tenants.current_prefix()}\0{value}"
    return f"presence.{kind}.{hashlib.blake2b(text.encode(), digest_size=16).hexdigest()}"


def room_group(room: str) -> str:
    """The group of ``room``'s presence events (joins, leaves, updates, typing, room states):
    one channel per process listens to it (:mod:`presence_app.realtime.feeds`), which hands
    each event to that process's sockets in the room."""
    return _group("room", room)


def sockets_group(room: str) -> str:
    """The group of every socket that joined ``room``: the project's own events to the room
    (``PresenceConsumerMixin.presence_group_send``, a chat message), never presence's."""
    return _group("sockets", room)


def watchers_group(user_id: str) -> str:
    """The group of every socket watching ``user_id`` (contact lists, dots)."""
    return _group("watch", str(user_id))


def self_group(user_id: str) -> str:
    """The private group of the user's own sockets: the only place their true status goes."""
    return _group("self", str(user_id))


def count_group(room: str) -> str:
    """The group of the processes serving a count-only room (one channel each): its joins and
    leaves reach them as ``presence.count`` marks, never its members' sockets."""
    return _group("count", room)


@lru_cache(maxsize=8)
def _count_only(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def count_only(room: str) -> bool:
    """Does ``room`` show its members a count and never the list (``COUNT_ONLY_ROOMS``)?"""
    pattern = _count_only(tuple(conf.get("COUNT_ONLY_ROOMS") or ()))
    return pattern is not None and pattern.fullmatch(room) is not None


def count_event(room: str) -> dict[str, Any]:
    """A count-only room's membership changed: no user named, the count is read on the tick."""
    return {"type": "presence.count", "room": room, "tenant": tenants.current()}


def targets(transition: Transition) -> list[str]:
    """Where a transition goes: a count-only room's members hear nothing of it (its count
    changes on the next tick), so neither its join or leave nor its users' updates go there."""
    if transition.room is not None:
        room = transition.room
        return [count_group(room) if count_only(room) else room_group(room)]
    rooms = [room_group(r) for r in transition.rooms if not count_only(r)]
    return [watchers_group(transition.user_id), *rooms]


async def apublish(transitions: Iterable[Transition], *, layer: Any = None) -> None:
    """Send ``transitions`` to their groups and fire their signals. Never raises for Redis."""
    transitions = list(transitions)
    if not transitions:
        return
    await _fan_out(transitions, layer or get_channel_layer())
    await _fire_signals(transitions)


def publish(transitions: Iterable[Transition], *, own: Presence | None = None) -> None:
    """:func:`apublish` for sync code (views, middleware, tasks, management commands), and with
    ``own`` :func:`announce_self` of it in the same round trip (a status set from sync code).
    Never raises for Redis, but for ``own`` (as :func:`announce_self`)."""
    transitions = list(transitions)
    if not transitions and own is None:
        return
    if _loop_running():
        # as async_to_sync says: "You cannot use AsyncToSync in the same thread as an async
        # event loop - just await the async function directly"
        return async_to_sync(apublish)(transitions)
    queues = _queues(transitions)
    mine = (self_group(own.user_id), self_event(own)) if own is not None else None
    sent = _send_from_sync(queues, mine)
    _fire_signals_sync(transitions)
    sent()


def _queues(transitions: list[Transition]) -> dict[str, list[dict[str, Any]]]:
    """Each group's events, in order (the groups named in the calling context: its tenant)."""
    queues: dict[str, list[dict[str, Any]]] = {}
    for transition in transitions:
        event = transition.as_event()
        if transition.room is not None and count_only(transition.room):
            event = count_event(transition.room)
        for group in targets(transition):
            queues.setdefault(group, []).append(event)
        if transition.room is None and conf.get("COUNT_SAMPLE"):
            # a sample shows its members' states and texts: their changes are marks too
            for room in filter(count_only, transition.rooms):
                queues.setdefault(count_group(room), []).append(count_event(room))
    return queues


async def _fan_out(transitions: list[Transition], layer: Any) -> None:
    if layer is None:
        return
    await _drain(_queues(transitions), layer)


def _dropped(exc: BaseException) -> None:
    # Live updates are best effort; the next snapshot corrects the browsers.
    if _log_failure.ready():
        logger.warning("presence: channel layer unavailable (%s); events dropped", exc)


async def _drain(queues: dict[str, list[dict[str, Any]]], layer: Any) -> None:
    gate = asyncio.Semaphore(GROUP_CONCURRENCY)

    async def drain(group: str, events: list[dict[str, Any]]) -> None:
        async with gate:
            for event in events:
                try:
                    await layer.group_send(group, event)
                except UNAVAILABLE as exc:
                    _dropped(exc)
                    return

    await asyncio.gather(*(drain(group, events) for group, events in queues.items()))


async def _fire_signals(transitions: list[Transition]) -> None:
    for transition in transitions:
        signal = SIGNALS.get(transition.kind)
        if signal is not None:
            _log_receivers(transition, await signal.asend_robust(**_signal_args(transition)))


def _fire_signals_sync(transitions: list[Transition]) -> None:
    """:func:`_fire_signals` in the calling thread: sync receivers run here, as ``asend_robust``
    from ``async_to_sync`` ran them (their database connection, their transaction); Django
    runs async ones on a loop of their own."""
    for transition in transitions:
        signal = SIGNALS.get(transition.kind)
        if signal is not None:
            _log_receivers(transition, signal.send_robust(**_signal_args(transition)))


def _signal_args(transition: Transition) -> dict[str, Any]:
    return {
        "sender": Transition,
        "user_id": transition.user_id,
        "state": transition.state,
        "at": datetime.fromtimestamp(transition.at, tz=UTC),
        "transition": transition,
    }


def _log_receivers(transition: Transition, results: list[tuple[Any, Any]]) -> None:
    for receiver, result in results:
        if isinstance(result, Exception):
            logger.error(
                "presence: receiver %r of a %s transition failed",
                receiver,
                transition.kind,
                exc_info=result,
            )


# -- sending from sync code ---------------------------------------------------------------------
def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _outer_loop() -> bool:
    """Whether this sync code runs for an event loop (``sync_to_async`` in an ASGI process),
    which ``async_to_sync`` sends to: its layer's connections are that loop's."""
    local = SyncToAsync.threadlocal
    return (
        getattr(local, "main_event_loop", None) is not None
        and getattr(local, "main_event_loop_pid", None) == os.getpid()
    )


def _send_from_sync(
    queues: dict[str, list[dict[str, Any]]], own: tuple[str, dict[str, Any]] | None
) -> Callable[[], None]:
    """Starts sending ``queues`` (best effort) and ``own``; returns what waits for the end,
    and raises the error ``own`` met (the layer away), as ``announce_self`` does."""
    layer = get_channel_layer()
    if layer is None:
        return _done
    publisher = _PubSub.of(layer)
    if publisher is not None:
        failed = publisher.send(queues, own)
        return _done if failed is None or own is None else _raising(failed)

    async def send() -> None:
        await _drain(queues, layer)
        if own is not None:
            await layer.group_send(*own)

    if _outer_loop() or not _Loop.serves(layer):
        try:
            async_to_sync(send)()
        except Exception as exc:  # noqa: BLE001 - raised once the signals have fired
            return _raising(exc)
        return _done
    return _Loop.submit(send()).result


def _done() -> None:
    return None


def _raising(exc: BaseException) -> Callable[[], None]:
    def wait() -> None:
        raise exc

    return wait


class _PubSub:
    """``group_send`` of channels-redis' ``RedisPubSubChannelLayer`` from sync code: the group's
    channel, its shard and the message as the layer's own ``group_send`` makes them (one of its
    loop layers, built but never run, names them), each ``PUBLISH`` sent by a redis-py client of
    the shard's host; all of a call's in one round trip a host. :meth:`of` is None for any
    other layer, and for hosts it cannot make a client of (a Sentinel service)."""

    _made: weakref.WeakKeyDictionary[Any, _PubSub | None] = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self, layer: Any) -> None:
        import redis
        from channels_redis.pubsub import RedisPubSubLoopLayer

        self.layer = layer
        self.names = RedisPubSubLoopLayer(*layer._args, **layer._kwargs, channel_layer=layer)
        self.clients: list[redis.Redis] = []
        for shard in self.names._shards:
            host = dict(shard.host)
            if "master_name" in host or "sentinels" in host:
                raise TypeError("a Sentinel host")
            address = host.pop("address", None)
            client = redis.Redis.from_url(address, **host) if address else redis.Redis(**host)
            self.clients.append(client)

    @classmethod
    def of(cls, layer: Any) -> _PubSub | None:
        try:
            return cls._made[layer]
        except KeyError:
            pass
        except TypeError:  # not weakly referable: not the pub/sub layer
            return None
        made = None
        kind = type(layer)
        if (kind.__module__, kind.__name__) == ("channels_redis.pubsub", "RedisPubSubChannelLayer"):
            try:
                made = cls(layer)
            except (ImportError, AttributeError, TypeError, ValueError) as exc:
                logger.debug("presence: the pub/sub layer's sync path is off (%s)", exc)
        with cls._lock:
            cls._made[layer] = made
        return made

    def send(
        self, queues: dict[str, list[dict[str, Any]]], own: tuple[str, dict[str, Any]] | None
    ) -> BaseException | None:
        """PUBLISHes every event, in order a group; the error it met (logged), if any."""
        by_client: dict[int, list[tuple[str, bytes]]] = {}
        groups = [(group, event) for group, events in queues.items() for event in events]
        if own is not None:
            groups.append(own)
        names = self.names
        for group, event in groups:
            channel = names._get_group_channel_name(group)
            shard = names._shards.index(names._get_shard(channel))
            by_client.setdefault(shard, []).append((channel, self.layer.serialize(event)))
        failed = None
        for shard, messages in by_client.items():
            try:
                if len(messages) == 1:
                    self.clients[shard].publish(*messages[0])
                    continue
                pipe = self.clients[shard].pipeline(transaction=False)
                for channel, message in messages:
                    pipe.publish(channel, message)
                pipe.execute()
            except UNAVAILABLE as exc:
                _dropped(exc)
                failed = exc
        return failed


class _Loop:
    """One event loop on a thread of this process for channels-redis' ``RedisChannelLayer``
    from sync code: the layer keeps a connection pool a loop, made once here instead of once a
    call. A forked child starts its own."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _pid = 0

    @staticmethod
    def serves(layer: Any) -> bool:
        kind = type(layer)
        return (kind.__module__, kind.__name__) == ("channels_redis.core", "RedisChannelLayer")

    @classmethod
    def submit(cls, coro: Any) -> concurrent.futures.Future[Any]:
        """Runs ``coro`` there, in a copy of the caller's context (its tenant)."""
        loop = cls._loop
        if loop is None or cls._pid != os.getpid() or loop.is_closed():
            with cls._lock:
                if cls._loop is None or cls._pid != os.getpid() or cls._loop.is_closed():
                    cls._loop = asyncio.new_event_loop()
                    cls._pid = os.getpid()
                    threading.Thread(
                        target=cls._loop.run_forever, name="presence-publish", daemon=True
                    ).start()
                loop = cls._loop
        return asyncio.run_coroutine_threadsafe(coro, loop)


def self_event(me: Presence) -> dict[str, Any]:
    """The event telling a user's own sockets their own presence (``self: true``)."""
    return {"type": "presence.update", **me.as_dict(), "self": True}


async def aannounce_self(me: Presence, *, layer: Any = None) -> None:
    """Send ``me`` (the user's presence as they see it) to all of their own sockets."""
    layer = layer or get_channel_layer()
    if layer is not None:
        await layer.group_send(self_group(me.user_id), self_event(me))


def announce_self(me: Presence) -> None:
    """:func:`aannounce_self` for sync code (without an event loop: see :func:`publish`)."""
    if _loop_running():
        async_to_sync(aannounce_self)(me)
    publish([], own=me)


async def atyping(room: str, user_id: str, state: str, sender: str, *, layer: Any = None) -> None:
    """Tells ``room`` that ``user_id`` is typing (``state``: "online" or "dnd", as the store
    said); ``sender`` (the typist's channel) is not told."""
    layer = layer or get_channel_layer()
    if layer is None or count_only(room):  # nobody in a count-only room learns who is there
        return
    await layer.group_send(
        room_group(room),
        {
            "type": "presence.typing",
            "user": user_id,
            "room": room,
            "state": state,
            "sender": sender,
        },
    )


def room_state_event(room: str, states: list[dict[str, Any]]) -> dict[str, Any]:
    """Members' live states in ``room`` (``presence_app.realtime.roomstate``): ``data`` None is a
    removal. Redacted per subject by each receiving session."""
    return {"type": "presence.roomstate", "room": room, "states": states}


async def aroom_states(room: str, states: list[dict[str, Any]], *, layer: Any = None) -> None:
    """Sends one batch of ``room``'s state changes to every connection in the room."""
    layer = layer or get_channel_layer()
    if layer is not None and states and not count_only(room):
        await layer.group_send(room_group(room), room_state_event(room, states))


# -- messages to one user's every connection ----------------------------------------------------
def message_event(payload: Any) -> dict[str, Any]:
    """The event :func:`asend_to_user` delivers: every socket and stream relays it as it is."""
    return {"type": "presence.message", "payload": payload}


async def asend_to_user(user_id: str, payload: Any, *, layer: Any = None) -> None:
    """``payload`` to every live socket and SSE stream of ``user_id``, on every process: they
    all sit in the user's private group. Raises when the channel layer is away (the caller
    asked for a delivery, unlike the best-effort transitions above)."""
    layer = layer or get_channel_layer()
    if layer is not None:
        await layer.group_send(self_group(user_id), message_event(payload))


async def aend_connections(user_id: str, *, layer: Any = None) -> None:
    """Ends every connection of ``user_id``, on every process: the user is being erased."""
    layer = layer or get_channel_layer()
    if layer is not None:
        await layer.group_send(self_group(user_id), {"type": "presence.forgotten"})


def session_tag(session_key: str | None) -> str | None:
    """What names a browser's sign-in in a ``presence.signed_out`` event: a keyed hash of its
    session key (never the key itself), None without a session."""
    if not session_key:
        return None
    return salted_hmac("presence_app.signed_out", str(session_key)).hexdigest()


async def aend_session(user_id: str, session_key: str, *, layer: Any = None) -> None:
    """Ends the connections of ``user_id`` opened with the sign-in ``session_key`` (it signed
    out), on every process: each closes, and its browser connects again with its cookies."""
    layer = layer or get_channel_layer()
    tag = session_tag(session_key)
    if layer is not None and tag is not None:
        await layer.group_send(self_group(user_id), {"type": "presence.signed_out", "session": tag})


async def aannounce_forgotten(user_id: str) -> None:
    """Fires ``user_forgotten``: the receivers erase their copies of the user."""
    for receiver, result in await signals.user_forgotten.asend_robust(None, user_id=user_id):
        if isinstance(result, Exception):
            logger.error(
                "presence: receiver %r of user_forgotten failed", receiver, exc_info=result
            )


async def arevoke(user_id: str, room: str, *, layer: Any = None) -> None:
    """Tells every connection of ``user_id`` to leave ``room`` (they sit in the user's private
    group; see :func:`presence_app.realtime.frames.on_own_event`)."""
    layer = layer or get_channel_layer()
    if layer is not None:
        await layer.group_send(self_group(user_id), {"type": "presence.revoke", "room": room})
