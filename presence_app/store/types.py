"""Values the store returns and the settings it runs with (plain Python: no Django, no Redis)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import repeat
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
    #: Layout 3 only (docs/store-layout-3.md): connection-registry buckets a shard.
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

    @classmethod
    def deriver(
        cls, viewer: str, reveal_all: bool, config: StoreConfig
    ) -> Callable[[list[str], list[Any]], dict[str, Presence]]:
        """A function from a get_many reply (the clock, then per chunk of users their seen
        scores, hidden scores, K_UNTIL entries and records: lua/get_many.lua) to
        ``{user_id: Presence}``, as ``viewer`` may see them. The rules are lib.lua's
        ``until_of``, ``public_state`` and ``live_message``; they run here so that Redis does
        no per-user work for a read. One pass per user, in line (no call per user), that
        splits a record only as far as a plain user's needs (its state and last activity) and
        leaves ``meta`` for when it is read (``_Meta``)."""
        span = max(config.lease_ttl, config.online_window)
        idle_after = config.idle_after
        new = object.__new__

        def derive(user_ids: list[str], reply: list[Any]) -> dict[str, Presence]:
            now = float(reply[0])
            out = {}
            first = 0
            for c in range(1, len(reply), 4):
                seen_, hidden_, ends_, records = reply[c : c + 4]
                last = first + len(seen_)
                for uid, seen, hidden, ends, raw in zip(
                    user_ids[first:last],
                    seen_,
                    hidden_ or repeat(None),  # empty while no one hides
                    ends_ or repeat(None),
                    records,
                    strict=False,
                ):
                    # Without __init__'s eight frozen setattr calls: this runs for every dot.
                    p = new(cls)
                    d = p.__dict__
                    d["user_id"] = uid
                    out[uid] = p
                    if raw is None:
                        st = la = ls = b""
                        text = _PLAIN
                    else:
                        if type(raw) is str:
                            raw = raw.encode()
                        st, la, ls, lv, text = raw.split(SEP_BYTES, 4)
                        if st:
                            if st == b"invisible":
                                if not (reveal_all or uid == viewer):
                                    # Nothing that changes while they hide: no activity,
                                    # device or status text.
                                    d["state"] = "offline"
                                    d["last_seen"] = float(lv) if lv else None
                                    d["last_active"] = None
                                    d["message"] = d["emoji"] = d["device"] = ""
                                    d["_record"] = raw
                                    continue
                                seen = hidden
                    active = float(la) if la else None
                    d["last_active"] = active
                    if seen and (float(ends) if ends else float(seen) + span) >= now:
                        d["last_seen"] = now
                        if not st:
                            d["state"] = (
                                "idle"
                                if active is not None and now - active >= idle_after
                                else "online"
                            )
                        else:
                            d["state"] = "invisible" if st == b"invisible" else "dnd"
                    else:
                        d["state"] = "offline"
                        # their last sign of life, when they have not been swept yet
                        d["last_seen"] = (
                            max(float(ls) if ls else 0.0, float(seen) if seen else 0.0) or None
                        )
                    if text.startswith(_PLAIN):  # no status text, no expiry, no meta
                        d["message"] = d["emoji"] = d["device"] = ""
                        d["meta"] = {}
                        continue
                    msg, emo, dev, mx, meta = text.split(SEP_BYTES, 4)
                    if msg or emo:
                        if mx and float(mx) < now:
                            d["message"] = d["emoji"] = ""
                        else:
                            d["message"], d["emoji"] = msg.decode(), emo.decode()
                    else:
                        d["message"] = d["emoji"] = ""
                    d["device"] = dev.decode() if dev else ""
                    if meta.startswith(SEP_BYTES):
                        d["meta"] = {}
                    else:
                        d["_record"] = raw  # meta: JSON, parsed when read
                first = last
            return out

        return derive


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
        else:  # a user with no record (store layout 3): no metadata
            d["meta"] = {}
        return d["meta"]


# After @dataclass set up the field (its __init__ keeps the default factory itself).
Presence.meta = _Meta()  # type: ignore[assignment]


#: The user record's fields, in lib.lua's order (FIELDS), and their separator.
RECORD_FIELDS = ("st", "la", "ls", "lv", "msg", "emoji", "dev", "mx", "meta", "w", "idle", "conns")
SEP = "\x1f"
SEP_BYTES = SEP.encode()
#: A record's fields from "msg" on start so when there is no message, emoji, device, expiry or
#: meta: a plain user's.
_PLAIN = SEP_BYTES * 5
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


def rooms_of_record(raw: Any) -> list[str]:
    """The rooms any of the user's connections joined, from their record (lib.lua: conns)."""
    if not raw:
        return []
    fields = _str(raw).split(SEP)
    conns = json.loads(fields[11]) if len(fields) > 11 and fields[11] else {}
    # Lua's cjson encodes an empty list as {}
    return sorted({room for rooms in conns.values() if isinstance(rooms, list) for room in rooms})


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
