"""The WebSocket protocol: parsing and validating client frames, and the server's own frames.

Every rule here raises :class:`FrameError`, which the consumer turns into an ``error`` frame, so
a bad frame is answered and changes nothing. The codes are part of the protocol (docs/websocket.md):

``bad_frame``     not a JSON object with a string ``type`` (or a binary frame)
``too_large``     longer than ``MAX_FRAME_BYTES``; a room state over ``ROOM_STATE_MAX_BYTES``
``unknown_type``  a ``type`` the server does not know
``invalid``       a field of the wrong type or shape (room name, state, message, ...): the
                  front door's own check (:mod:`presence_app.core.rules`), worded the same everywhere
``limit``         over ``MAX_ROOMS_PER_CONNECTION`` or ``MAX_WATCHED_USERS``
``forbidden``     ``CAN_JOIN`` refused the room
``not_joined``    ``leave``, ``typing`` or ``roomstate`` for a room this socket has not joined
``rate_limited``  more than ``MAX_FRAMES_PER_SECOND``
``unavailable``   Redis or the channel layer cannot be reached right now; try again later
``too_many_connections``  the user holds ``MAX_CONNECTIONS_PER_USER`` connections already (the
                  socket is then closed with 4429)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from .. import conf
from ..core import rules
from ..core.limits import TokenBucket
from ..store import Presence

#: What a client is told when Redis or the channel layer cannot serve its frame (``unavailable``).
TRY_AGAIN = "Presence is unavailable for the moment. Try again."
#: ... and when the connection found that out in the background and retries by itself.
RETRYING = "Presence is unavailable for the moment. The connection retries on its own."


class FrameError(Exception):
    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra


class ConnectionLimit(FrameError):
    """The user holds ``MAX_CONNECTIONS_PER_USER`` connections already: this one is refused
    (a socket is closed with its own code, ``consumers.CLOSE_TOO_MANY_CONNECTIONS``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            "too_many_connections",
            f"A user may hold at most {limit} connections at once. Close another tab or device.",
        )


#: The answer to every heartbeat: a client that hears nothing for a whole heartbeat interval
#: knows its connection is dead (a sleeping laptop, a dropped NAT mapping) and reconnects.
HEARTBEAT_ACK: dict[str, Any] = {"type": "heartbeat.ack"}


def error_frame(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "code": code, "detail": detail, **extra}


class FrameRate:
    """The client frames one connection may send: ``MAX_FRAMES_PER_SECOND``, a socket's frames
    and a stream's REST calls alike, bad frames included."""

    def __init__(self) -> None:
        self.limit = conf.get("MAX_FRAMES_PER_SECOND")
        self.bucket = TokenBucket(self.limit)

    def refusal(self, **extra: Any) -> dict[str, Any] | None:
        """None when a frame may go on; else the ``rate_limited`` error frame to answer it with."""
        if self.bucket.take():
            return None
        return error_frame(
            "rate_limited",
            f"A connection may send at most {self.limit} frames a second.",
            **extra,
        )


def state_frame(presences: Iterable[Presence], **extra: Any) -> dict[str, Any]:
    """A ``presence.state`` frame: the members of a room (``room``, ``page``, ``more``) or of
    the watch list (``watch``)."""
    return {"type": "presence.state", **extra, "members": [p.as_dict() for p in presences]}


def byte_pages(
    members: list[Presence], states: list[dict[str, Any]]
) -> Iterator[tuple[list[Presence], list[dict[str, Any]]]]:
    """``members`` (and each one's ``states``) cut into pages of about ``ROOM_SNAPSHOT_BYTES``
    of JSON: a member and their states go in one page, over the bound alone if they must. At
    least one page, empty when there is nobody."""
    limit = max(1, int(conf.get("ROOM_SNAPSHOT_BYTES")))
    theirs: dict[str, list[dict[str, Any]]] = {}
    for st in states:
        theirs.setdefault(str(st["user"]), []).append(st)
    page: list[Presence] = []
    page_states: list[dict[str, Any]] = []
    size = 0
    for p in members:
        own = theirs.get(p.user_id, [])
        cost = len(json.dumps(p.as_dict())) + sum(len(json.dumps(st)) for st in own) + 2
        if page and size + cost > limit:
            yield page, page_states
            page, page_states, size = [], [], 0
        page.append(p)
        page_states += own
        size += cost
    yield page, page_states


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(text: str | None, data: bytes | None, max_bytes: int) -> dict[str, Any]:
    """The frame as a dict with a string ``type``; size is checked before any decoding."""
    if text is None:
        raise FrameError("bad_frame", "Binary frames are not supported: send JSON text.")
    # A character is at most 4 UTF-8 bytes: skip the encode for the common, small frame.
    if len(text) > max_bytes or (len(text) * 4 > max_bytes and len(text.encode()) > max_bytes):
        raise FrameError("too_large", f"A frame may be at most {max_bytes} bytes.")
    try:
        # NaN and Infinity are Python's, not JSON; nesting deeper than Python's recursion
        # limit (a few KB of "[") raises RecursionError, not ValueError.
        frame = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError):
        raise FrameError("bad_frame", "The frame is not valid JSON.") from None
    if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
        raise FrameError("bad_frame", 'A frame must be a JSON object with a string "type".')
    return frame


def user_ids(frame: dict[str, Any], key: str) -> list[str]:
    """The ids listed under ``key`` (strings or integers), as strings, without duplicates."""
    values = frame.get(key)
    if not isinstance(values, list):
        raise FrameError("invalid", f'"{key}" must be a list of user ids.')
    return rules.user_ids(values)


def status_fields(frame: dict[str, Any]) -> dict[str, Any]:
    """Arguments of ``set_status`` from a frame: ``state``, ``message``, ``emoji``,
    ``expires_in`` (a missing or null field keeps its value, "" clears a message or emoji)."""
    fields = {k: frame.get(k) for k in ("state", "message", "emoji", "expires_in")}
    if all(fields[k] is None for k in ("state", "message", "emoji")):
        raise FrameError(
            "invalid", "A status frame must set at least one of state, message and emoji."
        )
    return fields


def privacy_frame(choice: Any) -> dict[str, Any]:
    """A user's own last-seen privacy choice (:mod:`presence_app.access.privacy`)."""
    return {
        "type": "presence.privacy",
        "last_seen": choice.visible_to,
        "approximate": choice.approximate,
    }


def hello(
    user_id: str, me: Presence | None, settings: dict[str, Any], activity_interval: float
) -> dict[str, Any]:
    """The first frame of every accepted socket: who you are, how often to beat, the limits."""
    return {
        "type": "hello",
        "user": user_id,
        "me": me.as_dict() if me is not None else None,
        "heartbeat": settings["HEARTBEAT_INTERVAL"],
        # how long a closed connection stays in its rooms: presence.js' tabs that share a
        # connection keep a closed tab's rooms as long (a reload comes back without a leave)
        "grace": settings["DISCONNECT_GRACE"],
        "activity": activity_interval,
        "typing": settings["TYPING_THROTTLE"],
        "limits": {
            "rooms": settings["MAX_ROOMS_PER_CONNECTION"],
            "watch": settings["MAX_WATCHED_USERS"],
            "frames_per_second": settings["MAX_FRAMES_PER_SECOND"],
            "frame_bytes": settings["MAX_FRAME_BYTES"],
            "message_length": settings["MAX_MESSAGE_LENGTH"],
            "room_length": settings["MAX_ROOM_NAME_LENGTH"],
            "room_state_bytes": settings["ROOM_STATE_MAX_BYTES"],
            "room_state_rate": settings["ROOM_STATE_RATE"],
        },
    }
