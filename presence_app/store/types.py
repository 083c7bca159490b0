"""Values the store returns and the settings it runs with (plain Python: no Django, no Redis)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain, repeat
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


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _aware(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, tz=UTC)


@dataclass(frozen=True)
class Presence:
    """One user's presence as a given viewer may see it."""

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
        """A function from a get_many reply (the clock, then each user's seen score, hidden
        score, K_UNTIL entry and record: lua/get_many.lua) to ``{user_id: Presence}``, as
        ``viewer`` may see them. The rules are lib.lua's ``until_of``, ``public_state`` and
        ``live_message``; they run here so that Redis does no per-user work for a read."""
        span = max(config.lease_ttl, config.online_window)
        idle_after = config.idle_after
        new = object.__new__

        def build(fields: dict[str, Any]) -> Presence:
            # Without __init__'s eight frozen setattr calls: this runs for every dot of a page.
            p = new(cls)
            p.__dict__.update(fields)
            return p

        def derive(user_ids: list[str], reply: list[Any]) -> dict[str, Presence]:
            now = float(reply[0])
            out = {}
            rows = []
            # per chunk of users (as many as its seen scores): seen scores, hidden ones, ends,
            # records
            first = 0
            for c in range(1, len(reply), 4):
                seen_, hidden_, ends_, records = reply[c : c + 4]
                rows.append(
                    zip(
                        user_ids[first : first + len(seen_)],
                        seen_,
                        hidden_ or repeat(None),  # empty while no one hides
                        ends_ or repeat(None),
                        records,
                        strict=False,
                    )
                )
                first += len(seen_)
            for uid, seen, hidden, ends, raw in chain.from_iterable(rows):
                if raw is None:
                    st = la = ls = lv = msg = emo = dev = mx = meta = b""
                else:
                    if isinstance(raw, str):
                        raw = raw.encode()
                    # the first nine fields; the rest, unsplit, is for the scripts
                    st, la, ls, lv, msg, emo, dev, mx, meta, _ = raw.split(SEP_BYTES, 9)
                if msg or emo or dev:
                    message, emoji, device = msg.decode(), emo.decode(), dev.decode()
                    if mx and float(mx) < now:
                        message = emoji = ""
                else:
                    message = emoji = device = ""
                data = json.loads(meta) if meta else {}
                invisible = st == b"invisible"
                if invisible and not (reveal_all or uid == viewer):
                    # Nothing that changes while they hide: no activity, device or status text.
                    out[uid] = build(
                        {
                            "user_id": uid,
                            "state": "offline",
                            "last_seen": float(lv) if lv else None,
                            "last_active": None,
                            "message": "",
                            "emoji": "",
                            "device": "",
                            "meta": data,
                        }
                    )
                    continue
                score = hidden if invisible else seen
                active = float(la) if la else None
                if score and (float(ends) if ends else float(score) + span) >= now:
                    last_seen: float | None = now
                    if invisible:
                        state = "invisible"
                    elif st == b"dnd":
                        state = "dnd"
                    elif active is not None and now - active >= idle_after:
                        state = "idle"
                    else:
                        state = "online"
                else:
                    state = "offline"
                    # their last sign of life, when they have not been swept yet
                    last_seen = (
                        max(float(ls) if ls else 0.0, float(score) if score else 0.0) or None
                    )
                out[uid] = build(
                    {
                        "user_id": uid,
                        "state": state,
                        "last_seen": last_seen,
                        "last_active": active,
                        "message": message,
                        "emoji": emoji,
                        "device": device,
                        "meta": data,
                    }
                )
            return out

        return derive


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
