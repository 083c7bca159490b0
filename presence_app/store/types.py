"""Values the store returns and the settings it runs with (plain Python: no Django, no Redis)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

State = Literal["online", "idle", "dnd", "invisible", "offline"]
SetState = Literal["auto", "dnd", "invisible"]
#: States in which a user counts as online (to the viewer that got them).
ONLINE_STATES = frozenset({"online", "idle", "dnd", "invisible"})


class PresenceError(Exception):
    """Base of the store's own errors."""


class InvalidInput(PresenceError, ValueError):
    """An argument the store refuses: bad id, room, state or oversized metadata."""


class UnknownConnection(PresenceError):
    """join() for a connection that holds no lease (never connected, or already swept)."""


class TooManyConnections(PresenceError):
    """connect() of a user who holds ``max_connections`` open connections already."""


@dataclass(frozen=True)
class StoreConfig:
    """The store's settings; ``presence_app.conf`` builds one from ``settings.PRESENCE``."""

    prefix: str = "presence"
    shards: int = 1
    lease_ttl: float = 90
    disconnect_grace: float = 20
    online_window: float = 60
    idle_after: float = 300
    metadata_ttl: float = 7 * 24 * 3600
    max_metadata_bytes: int = 2048
    max_message_length: int = 140
    sweep_batch: int = 1000
    #: Connection-registry buckets a shard (docs/store-layout.md).
    registry_buckets: int = 4096


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _aware(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


@dataclass(frozen=True)
class Presence:
    """One user's presence as a given viewer may see it.

    A presence the store reads (``get``, ``get_many``) parses its user's free-form ``meta``
    (JSON) when it is first read, not before: a page of dots never decodes it. Reading,
    comparing, printing, copying or pickling one behaves as if it had been built with every
    field set.
    """

    user_id: str
    state: State = "offline"
    last_seen: float | None = None
    last_active: float | None = None
    message: str = ""
    emoji: str = ""
    device: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    #: Set instead of ``last_seen`` when the user shows theirs only roughly: "recently",
    #: "within_week", "within_month" or "long_ago" (the front door's privacy, never the store).
    last_seen_approx: str = ""

    @property
    def is_online(self) -> bool:
        return self.state in ONLINE_STATES

    @property
    def last_seen_at(self) -> datetime | None:
        return _aware(self.last_seen)

    @property
    def last_active_at(self) -> datetime | None:
        return _aware(self.last_active)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape used on the wire and in the JSON API."""
        return {
            "user": self.user_id,
            "state": self.state,
            "last_seen": self.last_seen,
            "last_active": self.last_active,
            "message": self.message,
            "emoji": self.emoji,
            "device": self.device,
            "last_seen_approx": self.last_seen_approx,
        }


class _Meta:
    """``meta`` of a store-read presence: the record's free-form JSON, parsed when first read
    (``{}`` for a user with no record), then an attribute of the instance like any other (a
    non-data descriptor, which the instance's own value hides once set). A presence built by
    __init__ has it set from the start and never reaches this."""

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        d = instance.__dict__
        raw = d.pop("_record", None)
        if raw is not None:
            meta = raw.split(SEP_BYTES, 9)[8]
            d["meta"] = json.loads(meta) if meta else {}
        else:  # a user with no record: no metadata
            d["meta"] = {}
        return d["meta"]


# After @dataclass set up the field (its __init__ keeps the default factory itself).
Presence.meta = _Meta()  # type: ignore[assignment]


#: The user record's fields, in lib.lua's order (FIELDS), and their separator.
RECORD_FIELDS = ("st", "la", "ls", "lv", "msg", "emoji", "dev", "mx", "meta", "w", "idle", "conns")
SEP = "\x1f"
SEP_BYTES = SEP.encode()
#: What a room name may not contain, at the front door and in the store: a room is a name, and
#: the scripts' replies split on \x1e and \x1f.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f]")
#: The longest device label a connection keeps (``?device=``; ``LastSeen.device`` holds as many).
MAX_DEVICE_LENGTH = 64


def is_text(value: str) -> bool:
    """False for a str that is not Unicode text (a lone surrogate, as JSON's "\\ud800" gives):
    it cannot reach Redis as UTF-8. The front door's rules and the store's plans both ask it."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class StateCounts:
    """Online users by public state (``invisible``: the hidden ones, for superuser views).

    ``total`` is exact; the per-state counts are read for the ``counted`` most recently seen
    users only (see ``Store.state_counts``), so ``exact`` is False on a very large site.
    """

    online: int = 0
    idle: int = 0
    dnd: int = 0
    invisible: int = 0
    total: int = 0
    counted: int = 0

    @property
    def exact(self) -> bool:
        return self.counted >= self.total


@dataclass(frozen=True)
class Transition:
    """A change the public may see, made by one store call.

    ``kind`` is ``online``, ``offline``, ``update`` (state, message or emoji of an online user),
    ``join`` or ``leave`` (``room`` set). ``rooms`` lists the user's rooms on user-level kinds, so
    the caller can tell them; ``at`` is the time of the change (the last seen, for ``offline``).
    """

    kind: str
    user_id: str
    state: State
    at: float
    room: str | None = None
    rooms: tuple[str, ...] = ()
    message: str = ""
    emoji: str = ""

    @classmethod
    def parse_many(cls, reply: Any) -> list[Transition]:
        """The transitions a script returned: one string, split by \\x1e, fields by \\x1f
        (lib.lua: emit)."""
        if not reply:
            return []
        text = _str(reply)
        extras: dict[str, tuple[tuple[str, ...], str, str]] = {}  # a sweep's mostly repeat
        out = []
        new = object.__new__
        for line in text.split("\x1e"):
            kind, user, room, state, at, extra = line.split("\x1f")
            parsed = extras.get(extra)
            if parsed is None:
                data = json.loads(extra) if extra else {}
                rooms = data.get("rooms") or []  # Lua's cjson encodes an empty list as {}
                parsed = extras[extra] = (
                    tuple(rooms) if isinstance(rooms, list) else (),
                    data.get("message") or "",
                    data.get("emoji") or "",
                )
            rooms_, message, emoji = parsed
            # Without __init__'s eight frozen setattr calls: a sweep parses thousands.
            t = new(cls)
            t.__dict__.update(
                kind=kind,
                user_id=user,
                state=state,
                at=float(at),
                room=room or None,
                rooms=rooms_,
                message=message,
                emoji=emoji,
            )
            out.append(t)
        return out

    def as_event(self) -> dict[str, Any]:
        """The WebSocket event for this transition (``presence.join``, ...)."""
        event: dict[str, Any] = {
            "type": f"presence.{'update' if self.kind in ('online', 'offline') else self.kind}",
            "user": self.user_id,
            "state": self.state,
            "at": self.at,
        }
        if self.room is not None:
            event["room"] = self.room
        # Always both, "" when cleared: clients replace what they showed, never merge into it.
        event["message"] = self.message
        event["emoji"] = self.emoji
        return event
