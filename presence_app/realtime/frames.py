"""Client frames of the presence protocol, applied to a :class:`~presence_app.realtime.session.PresenceSession`.

:func:`handle` reads one decoded frame, calls the session, and turns every refusal into an
``error`` frame (codes in :mod:`presence_app.realtime.protocol`): a bad frame is answered and changes
nothing, Redis being away gets ``unavailable``, never a crashed socket.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from .. import rooms
from ..core import tenants
from ..failopen import log_outage
from ..store import UNAVAILABLE, InvalidInput
from . import protocol
from .protocol import FrameError
from .session import PresenceSession

Handler = Callable[[PresenceSession, dict[str, Any]], Awaitable[None]]


async def on_heartbeat(session: PresenceSession, frame: dict[str, Any]) -> None:
    await session.heartbeat()
    await session.send(protocol.HEARTBEAT_ACK)


async def on_activity(session: PresenceSession, frame: dict[str, Any]) -> None:
    await session.activity()


async def on_join(session: PresenceSession, frame: dict[str, Any]) -> None:
    await session.join(frame.get("room"))
    if frame.get("permanent") is True:  # a membership too (presence_app/rooms.py)
        with tenants.activate(session.tenant):  # its event goes to the user's own group
            await rooms.aadd_member(session.user, frame["room"], sender=session.channel_name)


async def on_leave(session: PresenceSession, frame: dict[str, Any]) -> None:
    # apply() runs this in the session's workspace: the revoke reaches the user's other
    # connections there (their private group is the workspace's).
    if frame.get("permanent") is True:  # ends the membership, joined here or not
        await rooms.aremove_member(session.user, frame.get("room"))
        session.owed.discard(frame["room"])  # nor joined later, if an outage held it back
        if frame["room"] not in session.rooms:
            return
    await session.leave(frame.get("room"))


async def on_status(session: PresenceSession, frame: dict[str, Any]) -> None:
    await session.set_status(**protocol.status_fields(frame))


async def on_privacy(session: PresenceSession, frame: dict[str, Any]) -> None:
    """``last_seen`` (everyone, audience, nobody) and/or ``approximate``: the user's choice of
    who sees their last seen; the whole choice comes back as a ``privacy`` frame."""
    if frame.get("last_seen") is None and frame.get("approximate") is None:
        raise FrameError("invalid", 'A privacy frame must set "last_seen", "approximate" or both.')
    await session.set_privacy(frame.get("last_seen"), frame.get("approximate"))


async def on_typing(session: PresenceSession, frame: dict[str, Any]) -> None:
    await session.typing(frame.get("room"))


async def on_watch(session: PresenceSession, frame: dict[str, Any]) -> None:
    """``users`` replaces the watch list, ``add`` / ``remove`` change it (for lists longer than
    one frame holds). Watched users' presence comes back as a ``presence.state``."""
    if "users" in frame:
        ids = protocol.user_ids(frame, "users")
        await session.watch(set(ids), ids)
    elif "add" in frame:
        ids = protocol.user_ids(frame, "add")
        await session.watch(session.watched | set(ids), ids)
    elif "remove" in frame:
        ids = protocol.user_ids(frame, "remove")
        await session.watch(session.watched - set(ids), [])
    else:
        raise FrameError("invalid", 'A watch frame must have "users", "add" or "remove".')


async def on_roomstate(session: PresenceSession, frame: dict[str, Any]) -> None:
    """``data`` (a JSON object, or null to clear) is this connection's live state in ``room``:
    a cursor, a selection. Coalesced: the room's members get the latest at ``ROOM_STATE_RATE``."""
    if "data" not in frame:
        raise FrameError(
            "invalid", 'A roomstate frame must have "room" and "data" (an object or null).'
        )
    await session.set_room_state(frame.get("room"), frame["data"])


async def on_hello(session: PresenceSession, frame: dict[str, Any]) -> None:
    """The client's own hello: ``accept`` lists the frame types it handles beyond the first
    protocol's (``presence.diff``: joins, leaves and updates batched per tick). Unknown types
    are ignored (a newer client), so it may be sent to any server."""
    accept = frame.get("accept", [])
    if not isinstance(accept, list) or not all(isinstance(a, str) for a in accept):
        raise FrameError("invalid", '"accept" must be a list of frame types.')
    session.accept(accept)


HANDLERS: dict[str, Handler] = {
    "hello": on_hello,
    "heartbeat": on_heartbeat,
    "activity": on_activity,
    "join": on_join,
    "leave": on_leave,
    "status": on_status,
    "privacy": on_privacy,
    "typing": on_typing,
    "watch": on_watch,
    "roomstate": on_roomstate,
}


async def handle(session: PresenceSession, frame: dict[str, Any]) -> None:
    """Applies ``frame``; any refusal goes back to the browser as an ``error`` frame."""
    liveness = session.liveness
    with liveness.handling() if liveness is not None else contextlib.nullcontext():
        error = await apply(session, frame)
    if error is not None:
        await session.send(error)


async def on_own_event(session: PresenceSession, event: dict[str, Any]) -> None:
    """An event to the user's own connections about their access to a room:
    ``presence.permanent`` (they became a member of a permanent room, on another connection or
    by a call: this connection joins it too, a refusal goes to its browser) or
    ``presence.revoke`` (access taken away: this connection leaves the room now)."""
    if session.closed or not isinstance(event.get("room"), str):
        return
    if event.get("type") == "presence.revoke":
        await session.revoke(event["room"])
    elif event.get("sender") != session.channel_name:
        error = await join_unasked(session, event["room"])
        if error is not None:
            await session.send(error)


#: The ``presence.*`` events of the user's own group that change what a connection is in.
OWN_EVENTS = frozenset({"presence.permanent", "presence.revoke"})


async def join_unasked(session: PresenceSession, room: Any) -> dict[str, Any] | None:
    """A join the connection makes by itself (a permanent room): applied like a join frame, and
    the ``error`` frame of a refusal returned. The browser did not ask, so it will not ask again
    after an outage's ``unavailable``: the session owes the room and joins it when Redis answers
    (its recovery, on the next heartbeat)."""
    error = await apply(session, {"type": "join", "room": room})
    if error is not None and error["code"] == "unavailable" and isinstance(room, str):
        session.owe(room)
    return error


async def apply(session: PresenceSession, frame: dict[str, Any]) -> dict[str, Any] | None:
    """Applies ``frame``; returns the ``error`` frame of a refusal (None when it was done):
    the socket sends it, a REST call (:mod:`presence_app.realtime.rest`) answers with it."""
    extra: dict[str, Any] = {"frame": frame.get("type")}
    if isinstance(frame.get("room"), str) and len(frame["room"]) <= 1000:
        extra["room"] = frame["room"]
    try:
        handler = HANDLERS.get(frame["type"])
        if handler is None:
            raise FrameError("unknown_type", "The server does not know this frame type.")
        # In the session's workspace, whatever the caller's: a handler may call the front door
        # or rooms outside the session's own methods (a permanent leave's revoke).
        async with session.lock:
            with tenants.activate(session.tenant):
                await handler(session, frame)
    except FrameError as exc:
        return protocol.error_frame(exc.code, exc.detail, **{**extra, **exc.extra})
    except InvalidInput as exc:
        return protocol.error_frame("invalid", str(exc), **extra)
    except UNAVAILABLE as exc:
        log_outage(exc)
        return protocol.error_frame("unavailable", protocol.TRY_AGAIN, **extra)
    return None


def is_presence_frame(frame: Any) -> bool:
    """Is ``frame`` (decoded JSON) one of the presence protocol's?"""
    return isinstance(frame, dict) and frame.get("type") in HANDLERS
