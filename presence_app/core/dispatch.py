"""Where transitions go: channel-layer groups (to browsers) and Django signals (to Python code).

The store returns the :class:`~presence_app.store.Transition` list of every change it made; the
code that made the change hands it to :func:`apublish` (async) or :func:`publish`, so every
transition is announced exactly once, by the process that observed it:

- ``join`` / ``leave`` go to the room's group;
- ``online`` / ``offline`` / ``update`` go to the user's watchers and to each of ``t.rooms``;
- ``online`` / ``offline`` / ``update`` also fire ``user_online`` / ``user_offline`` /
  ``status_changed`` (see :mod:`presence_app.signals`).

Group names are hashes, never user text: channel-layer names allow only ASCII alnum, ``-_.`` and
fewer than 100 characters, and a room may be called anything the room pattern admits.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from .. import signals
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
    """The group of every socket that joined ``room``."""
    return _group("room", room)


def watchers_group(user_id: str) -> str:
    """The group of every socket watching ``user_id`` (contact lists, dots)."""
    return _group("watch", str(user_id))


def self_group(user_id: str) -> str:
    """The private group of the user's own sockets: the only place their true status goes."""
    return _group("self", str(user_id))


def targets(transition: Transition) -> list[str]:
    if transition.room is not None:
        return [room_group(transition.room)]
    return [watchers_group(transition.user_id), *(room_group(r) for r in transition.rooms)]


async def apublish(transitions: Iterable[Transition], *, layer: Any = None) -> None:
    """Send ``transitions`` to their groups and fire their signals. Never raises for Redis."""
    transitions = list(transitions)
    if not transitions:
        return
    await _fan_out(transitions, layer or get_channel_layer())
    await _fire_signals(transitions)


def publish(transitions: Iterable[Transition]) -> None:
    """:func:`apublish` for sync code (middleware, management commands)."""
    transitions = list(transitions)
    if transitions:
        async_to_sync(apublish)(transitions)


async def _fan_out(transitions: list[Transition], layer: Any) -> None:
    if layer is None:
        return
    queues: dict[str, list[dict[str, Any]]] = {}
    for transition in transitions:
        event = transition.as_event()
        for group in targets(transition):
            queues.setdefault(group, []).append(event)
    gate = asyncio.Semaphore(GROUP_CONCURRENCY)

    async def drain(group: str, events: list[dict[str, Any]]) -> None:
        async with gate:
            for event in events:
                try:
                    await layer.group_send(group, event)
                except UNAVAILABLE as exc:
                    # Live updates are best effort; the next snapshot corrects the browsers.
                    if _log_failure.ready():
                        logger.warning(
                            "presence: channel layer unavailable (%s); events dropped", exc
                        )
                    return

    await asyncio.gather(*(drain(group, events) for group, events in queues.items()))


async def _fire_signals(transitions: list[Transition]) -> None:
    for transition in transitions:
        signal = SIGNALS.get(transition.kind)
        if signal is None:
            continue
        results = await signal.asend_robust(
            sender=Transition,
            user_id=transition.user_id,
            state=transition.state,
            at=datetime.fromtimestamp(transition.at, tz=UTC),
            transition=transition,
        )
        for receiver, result in results:
            if isinstance(result, Exception):
                logger.error(
                    "presence: receiver %r of a %s transition failed",
                    receiver,
                    transition.kind,
                    exc_info=result,
                )


def self_event(me: Presence) -> dict[str, Any]:
    """The event telling a user's own sockets their own presence (``self: true``)."""
    return {"type": "presence.update", **me.as_dict(), "self": True}


async def aannounce_self(me: Presence, *, layer: Any = None) -> None:
    """Send ``me`` (the user's presence as they see it) to all of their own sockets."""
    layer = layer or get_channel_layer()
    if layer is not None:
        await layer.group_send(self_group(me.user_id), self_event(me))


def announce_self(me: Presence) -> None:
    """:func:`aannounce_self` for sync code."""
    async_to_sync(aannounce_self)(me)


async def atyping(room: str, user_id: str, state: str, sender: str, *, layer: Any = None) -> None:
    """Tells ``room`` that ``user_id`` is typing (``state``: "online" or "dnd", as the store
    said); ``sender`` (the typist's channel) is not told."""
    layer = layer or get_channel_layer()
    if layer is None:
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
    if layer is not None and states:
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
