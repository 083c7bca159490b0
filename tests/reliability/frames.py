"""Hostile WebSocket frames (Hypothesis strategies) and a model of what the server must answer.

``frames()`` generates what a broken or malicious client sends: malformed and deeply nested
JSON, wrong types, huge strings, control characters and odd Unicode (lone surrogates included,
JSON-escaped as the wire requires), room names with ``{ } : * %`` and newlines, NaN, Infinity
and negative numbers, unknown types, binary frames.

``Model`` is the protocol (docs/websocket.md, presence_app/realtime/protocol.py) restated independently: fed the
frames one by one, it says what each must get back (an ``error`` with a code, a
``presence.state``, a status confirmation or nothing) and what the socket's state in the store
must then be. ``Conversation`` drives a socket (real server or in-process) through both and
checks every answer against the model.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from presence_app.store.keys import KeySpace

MAX_FRAME_BYTES = 4096
MAX_ROOMS = 50
MAX_WATCHED = 500
MAX_MESSAGE = 140
MAX_EMOJI = 32
MAX_ROOM_NAME = 100
DEFAULT_ROOM_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,99}$"
#: A room pattern that lets anything through, so that hostile names reach the store's keys.
ANY_ROOM = r"(?s).+"
SET_STATES = {"auto": "auto", "online": "auto", "dnd": "dnd", "invisible": "invisible"}
TYPES = ["heartbeat", "activity", "join", "leave", "status", "typing", "watch"]

# -- strategies ---------------------------------------------------------------------------------
NASTY_TEXT = [
    "",
    " ",
    "\n",
    "\r\n",
    "\x00",
    "\t",
    "\x7f",
    "\u2028",
    "\u202e",
    "\ufeff",
    "\ufffd",
    "{",
    "}",
    "{presence:0}",
    "}:*",
    "*",
    "?",
    "[a-z]",
    "%",
    "%41",
    "%25",
    "a%00b",
    "lobby\n",
    "lobby\r",
    "\nlobby",
    "a b",
    "a|b",
    "r:x",
    "u:1",
    ":",
    "::",
    "{x}:r:y",
    "\\",
    '"',
    "'",
    "<script>alert(1)</script>",
    "$(id)",
    "../../etc",
    "😀",
    "e\u0301",
    "\U0010ffff",
    "\ud800",
    "\udfff",
    "a\ud83d",
    "ß",
    "İ",
    "x" * 100,
    "x" * 101,
    "x" * 256,
    "lobby",
    "design",
]
texts = st.one_of(
    st.sampled_from(NASTY_TEXT),
    st.text(max_size=24),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8).map(lambda s: s + "{}:*\n"),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.:@", min_size=1, max_size=12),
    st.integers(3000, 9000).map(lambda n: "y" * n),
)
numbers = st.one_of(
    st.sampled_from(
        [
            0,
            -1,
            -0.0,
            1,
            2**63,
            -(2**63),
            10**30,
            1e308,
            0.5,
            3600,
            86400.5,
            math.nan,
            math.inf,
            -math.inf,
            1e-300,
        ]
    ),
    st.integers(),
    st.floats(),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
rooms = st.one_of(texts, json_values, st.sampled_from(["lobby", "design", "kitchen", "a"]))
user_ids = st.one_of(
    st.integers(-5, 10**6),
    texts,
    st.booleans(),
    st.none(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
)
id_lists = st.one_of(
    st.lists(user_ids, max_size=12),
    st.integers(0, 900).map(lambda n: [str(i) for i in range(n)]),
    json_values,
)


def _frame_of(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    base: dict[str, Any] = {"type": st.just(kind)}
    if kind in ("join", "leave", "typing"):
        return st.fixed_dictionaries(base, optional={"room": rooms, "extra": json_values})
    if kind == "status":
        return st.fixed_dictionaries(
            base,
            optional={
                "state": st.one_of(
                    st.sampled_from([*SET_STATES, "idle", "offline", "DND", ""]), json_values
                ),
                "message": st.one_of(texts, json_values),
                "emoji": st.one_of(st.sampled_from(["😀", "📅", "", "x" * 33]), texts, json_values),
                "expires_in": st.one_of(
                    st.sampled_from([3600, 7200.5, 1e308]), numbers, json_values
                ),
            },
        )
    if kind == "watch":
        return st.fixed_dictionaries(
            base, optional={"users": id_lists, "add": id_lists, "remove": id_lists}
        )
    return st.fixed_dictionaries(base, optional={"room": rooms, "users": id_lists})


structured = st.one_of(
    *(_frame_of(kind) for kind in TYPES),
    st.fixed_dictionaries(
        {"type": st.one_of(texts, json_values)}, optional={"room": rooms, "state": json_values}
    ),
    st.dictionaries(texts, json_values, max_size=4),
)


# Frames a real client could send, now and then with one hostile detail: they change state.
ROOM_POOL = [
    "lobby",
    "design",
    "r1",
    "a.b",
    "x:y",
    "u@h",
    "Z-9",
    "lobby:{x}",
    "a*",
    "{0}",
    "new\nline",
    "tab\there",
    "%41",
    "😀",
    "u:1",
    "r:lobby",
    " lead",
    "x" * 100,
]
plausible = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["join", "join", "leave", "typing"]),
            "room": st.sampled_from(ROOM_POOL),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("status")},
        optional={
            "state": st.sampled_from(["online", "dnd", "invisible", "auto"]),
            "message": st.sampled_from(
                [
                    "",
                    "lunch",
                    "<script>alert(1)</script>",
                    "Ünï ✓",
                    "a\tb",
                    "m" * 140,
                    "m" * 141,
                    "bell\x07",
                ]
            ),
            "emoji": st.sampled_from(["", "📅", "🎧", "e" * 33]),
            "expires_in": st.sampled_from([3600, 86400.0, 0, -5]),
        },
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("watch"),
            "users": st.lists(
                st.one_of(st.integers(1, 50), st.sampled_from(["1", "7", "x y", "\u00a0"])),
                max_size=6,
            ),
        }
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["heartbeat", "activity"])}),
)


@st.composite
def encoded(draw: st.DrawFn, strategy: st.SearchStrategy[Any] = structured) -> str:
    """A structured frame as JSON text, sometimes ASCII-escaped, sometimes raw UTF-8 (only
    when that is valid: a lone surrogate can cross the wire only escaped)."""
    frame = draw(strategy)
    text = json.dumps(frame)  # NaN and Infinity as Python writes them: not JSON
    if draw(st.booleans()):
        raw = json.dumps(frame, ensure_ascii=False)
        try:
            raw.encode()
            text = raw
        except UnicodeEncodeError:
            pass
    return text


RAW = [
    "",
    " ",
    "null",
    "true",
    "1",
    '"join"',
    "[]",
    "{}",
    "[{}]",
    '{"type": null}',
    '{"type": 1}',
    '{"type": ["join"]}',
    '{"type": "join"',
    '{"type": "join",}',
    "{'type': 'join'}",
    '{"type": "heartbeat"}{"type": "heartbeat"}',
    '\ufeff{"type": "heartbeat"}',
    '{"type": "heartbeat", "x": NaN}',
    '{"type": "status", "expires_in": Infinity, "message": "m"}',
    '{"type": "status", "expires_in": -Infinity, "message": "m"}',
    '{"type": "join", "room": "a", "type": "heartbeat"}',
    "[" * 3000 + "]" * 3000,
    '{"a":' * 1500 + "1" + "}" * 1500,
    '{"type": "join", "room": "\\ud800"}',
    '{"type": "status", "message": "\\udfff"}',
    '{"type": "status", "emoji": "\\ud83d"}',
    '{"type": "join", "room": "lobby\\u0000"}',
    '{"type": "watch", "users": [1e999]}',
    '{"type": "watch", "users": [' + ",".join(['"' + "9" * 250 + '"'] * 3) + "]}",
    "x" * (MAX_FRAME_BYTES + 1),
    '{"type": "heartbeat", "pad": "' + "é" * 2100 + '"}',
]
raw_text = st.one_of(st.sampled_from(RAW), st.text(max_size=64))


@st.composite
def frames(draw: st.DrawFn) -> str | bytes:
    """One frame as sent on the wire: JSON text (mostly), raw text, or binary."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.binary(max_size=32))
    if kind <= 3:
        text = draw(raw_text)
        try:
            text.encode()
        except UnicodeEncodeError:  # not sendable as a text frame
            text = "?"
        return text
    return draw(encoded(structured if kind <= 11 else plausible))


# -- the model ------------------------------------------------------------------------------------
class _Refused(Exception):
    def __init__(self, code: str) -> None:
        self.code = code


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _utf8(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


@dataclass
class Expect:
    """What one frame must get back: an error code, a room's state, a status confirmation
    (state, message, emoji), a heartbeat's ack or nothing."""

    error: str | None = None
    ack: bool = False
    state_of: str | None = None
    watch_state: int | None = None  # members in the watch snapshot
    status: tuple[str, str, str] | None = None
    may_clear: bool = False  # the message and emoji may have expired already (read as "")


#: A status text set to expire sooner than this may be gone by the time a test looks at it.
EXPIRY_SLACK = 60.0


@dataclass
class Model:
    room_pattern: str = DEFAULT_ROOM_PATTERN
    rooms: set[str] = field(default_factory=set)
    watched: set[str] = field(default_factory=set)
    state: str = "online"  # as the user sees themself: online, dnd, invisible
    message: str = ""
    emoji: str = ""
    expiring: bool = False  # the message and emoji expire within EXPIRY_SLACK

    def answer(self, frame: str | bytes) -> Expect:
        try:
            return self._answer(frame)
        except _Refused as refused:
            return Expect(error=refused.code)

    def _answer(self, data: str | bytes) -> Expect:
        if isinstance(data, bytes):
            raise _Refused("bad_frame")
        if len(data.encode()) > MAX_FRAME_BYTES:
            raise _Refused("too_large")
        try:
            frame = json.loads(data, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            raise _Refused("bad_frame") from None
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            raise _Refused("bad_frame")
        kind = frame["type"]
        if kind not in TYPES:
            raise _Refused("unknown_type")
        return getattr(self, f"_{kind}")(frame)

    def _heartbeat(self, frame: dict[str, Any]) -> Expect:
        return Expect(ack=True)

    def _activity(self, frame: dict[str, Any]) -> Expect:
        return Expect()

    def _room(self, frame: dict[str, Any]) -> str:
        room = frame.get("room")
        if not isinstance(room, str) or not room or len(room) > MAX_ROOM_NAME:
            raise _Refused("invalid")
        if not _utf8(room) or not re.fullmatch(self.room_pattern, room):
            raise _Refused("invalid")
        if any(ord(c) < 32 for c in room):  # whatever the pattern: rooms are names
            raise _Refused("invalid")
        return room

    def _join(self, frame: dict[str, Any]) -> Expect:
        room = self._room(frame)
        if room not in self.rooms and len(self.rooms) >= MAX_ROOMS:
            raise _Refused("limit")
        self.rooms.add(room)
        return Expect(state_of=room)

    def _leave(self, frame: dict[str, Any]) -> Expect:
        room = self._room(frame)
        if room not in self.rooms:
            raise _Refused("not_joined")
        self.rooms.discard(room)
        return Expect()

    def _typing(self, frame: dict[str, Any]) -> Expect:
        if self._room(frame) not in self.rooms:
            raise _Refused("not_joined")
        return Expect()

    @staticmethod
    def _text(value: Any, limit: int) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or len(value) > limit or not _utf8(value):
            raise _Refused("invalid")
        if any(ord(c) < 32 and c != "\t" for c in value):
            raise _Refused("invalid")
        return value

    def _status(self, frame: dict[str, Any]) -> Expect:
        state = frame.get("state")
        if state is not None and not (isinstance(state, str) and state in SET_STATES):
            raise _Refused("invalid")
        for key in ("message", "emoji"):
            if frame.get(key) is not None and not isinstance(frame[key], str):
                raise _Refused("invalid")
        expires = frame.get("expires_in")
        if expires is not None and (
            isinstance(expires, bool)
            or not isinstance(expires, (int, float))
            or not expires > 0
            or not math.isfinite(expires)
        ):
            raise _Refused("invalid")
        if state is None and frame.get("message") is None and frame.get("emoji") is None:
            raise _Refused("invalid")
        message = self._text(frame.get("message"), MAX_MESSAGE)
        emoji = self._text(frame.get("emoji"), MAX_EMOJI)
        if state is not None:
            self.state = {"auto": "online"}.get(SET_STATES[state], SET_STATES[state])
        if message is not None:
            self.message = message
        if emoji is not None:
            self.emoji = emoji
        if message is not None or emoji is not None:  # each text change sets the expiry anew
            self.expiring = expires is not None and expires < EXPIRY_SLACK
        return Expect(status=(self.state, self.message, self.emoji), may_clear=self.expiring)

    def statuses(self) -> set[tuple[str, str, str]]:
        """What the store may hold now: the status, or (soon to expire) without its texts."""
        now = {(self.state, self.message, self.emoji)}
        return now | {(self.state, "", "")} if self.expiring else now

    @staticmethod
    def _ids(frame: dict[str, Any], key: str) -> list[str]:
        values = frame.get(key)
        if not isinstance(values, list):
            raise _Refused("invalid")
        out: dict[str, None] = {}
        for value in values:
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise _Refused("invalid")
            text = str(value)
            if not text or len(text) > 255 or not text.isprintable():
                raise _Refused("invalid")
            out[text] = None
        return list(out)

    def _watch(self, frame: dict[str, Any]) -> Expect:
        if "users" in frame:
            ids = self._ids(frame, "users")
            target = set(ids)
        elif "add" in frame:
            ids = self._ids(frame, "add")
            target = self.watched | set(ids)
        elif "remove" in frame:
            target, ids = self.watched - set(self._ids(frame, "remove")), []
        else:
            raise _Refused("invalid")
        if len(target) > MAX_WATCHED:
            raise _Refused("limit")
        self.watched = target
        return Expect(watch_state=len(ids)) if ids else Expect()


# -- driving a socket through it ------------------------------------------------------------------
EVENTS = ("presence.join", "presence.leave", "presence.update", "presence.typing")


class Conversation:
    """Sends frames on a socket and checks each answer against the model. ``sock`` has
    ``send_raw(text|bytes)`` and ``next(timeout)``, the frames in the order the server sent
    them (tests/reliability/clients.py Client and the in-process adapter both do)."""

    def __init__(self, sock: Any, model: Model) -> None:
        self.sock = sock
        self.model = model
        self.sent = 0
        self.codes: dict[str, int] = {}

    async def _until_barrier(self) -> tuple[list[dict[str, Any]], int]:
        """The frames up to the barrier's error, without room events, and the acks among them
        (counted apart: the socket also heartbeats in the background)."""
        await self.sock.send_raw(json.dumps({"type": "sync"}))
        out, acks = [], 0
        while True:
            frame = await self.sock.next(10)
            if frame["type"] == "<closed>":
                raise AssertionError(f"the server closed the socket: {frame}")
            if frame["type"] == "error" and frame.get("frame") == "sync":
                return out, acks
            if frame["type"] in EVENTS and not frame.get("self"):
                continue  # events of the socket's rooms: not answers
            if frame["type"] == "heartbeat.ack":
                acks += 1
                continue
            out.append(frame)

    async def send(self, data: str | bytes) -> None:
        expect = self.model.answer(data)
        await self.sock.send_raw(data)
        self.sent += 1
        got, acks = await self._until_barrier()
        if expect.ack:
            assert acks >= 1, ("a heartbeat without its ack", repr(data[:300]), got)
        answers = [f for f in got if not (f["type"] == "presence.update" and f.get("self"))]
        shown = repr(data[:300])
        if expect.error:
            self.codes[expect.error] = self.codes.get(expect.error, 0) + 1
            assert [(f["type"], f.get("code")) for f in answers] == [("error", expect.error)], (
                shown,
                answers,
            )
            assert isinstance(answers[0]["detail"], str) and answers[0]["detail"]
        else:
            kind = (
                "joined"
                if expect.state_of is not None
                else "watched"
                if expect.watch_state is not None
                else "status"
                if expect.status
                else "quiet"
            )
            self.codes[kind] = self.codes.get(kind, 0) + 1
        if expect.error:
            pass
        elif expect.state_of is not None:
            assert [(f["type"], f.get("room")) for f in answers] == [
                ("presence.state", expect.state_of)
            ], (shown, answers)
        elif expect.watch_state is not None:
            assert [(f["type"], f.get("watch")) for f in answers] == [("presence.state", True)], (
                shown,
                answers,
            )
            assert len(answers[0]["members"]) == expect.watch_state
        else:
            assert answers == [], (shown, answers)
        if expect.status is not None:
            cleared = (expect.status[0], "", "")
            await self.confirmed(
                {expect.status, cleared} if expect.may_clear else {expect.status}, got
            )

    async def confirmed(self, status: set[tuple[str, str, str]], got: list[dict[str, Any]]) -> None:
        """The user's own sockets hear of a status change (through the channel layer: it may
        come after the barrier)."""
        for frame in got:
            if frame["type"] == "presence.update" and self._is(frame, status):
                return
        # a deadline of its own: heartbeat acks keep coming, so waiting frame by frame never ends
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while True:
            assert loop.time() < deadline, ("no update of the user's own status", status, got)
            frame = await self.sock.next(5)
            if frame["type"] == "presence.update" and frame.get("self") and self._is(frame, status):
                return
            if frame["type"] == "heartbeat.ack":
                continue  # the socket heartbeats in the background (see _until_barrier)
            assert frame["type"] in EVENTS, frame

    @staticmethod
    def _is(frame: dict[str, Any], status: set[tuple[str, str, str]]) -> bool:
        return (frame["state"], frame["message"], frame["emoji"]) in status

    async def reset(self) -> None:
        """Back to a known state: no rooms, plain online, nothing watched."""
        for room in sorted(self.model.rooms):
            await self.send(json.dumps({"type": "leave", "room": room}))
        if (self.model.state, self.model.message, self.model.emoji) != ("online", "", ""):
            await self.send(
                json.dumps({"type": "status", "state": "online", "message": "", "emoji": ""})
            )
        if self.model.watched:
            await self.send(json.dumps({"type": "watch", "users": []}))


#: Every key the store and the channel layer may write, for a prefix: user text only ever
#: appears percent-encoded (after ``:p:``, ``:r:`` and ``:rs:``), group names only as hashes. A
#: record is a field of ``recs``, its user id never in a key name.
def key_layout(prefix: str, layer_prefix: str) -> re.Pattern[str]:
    p, lp = re.escape(prefix), re.escape(layer_prefix)
    shard = (
        r"(seen|hidden|until|procs|last|rooms|recs|rexp|copies|web|graces|gone|clean|c:\d+"
        r"|(p|r|rs):[A-Za-z0-9._~%-]+)"
    )
    layout = KeySpace.layout
    return re.compile(
        rf"\{{{p}:\d+\}}:{layout}:{shard}"
        rf"|{p}:(history|{layout}:lock:(sweep|flush))"
        rf"|{lp}:group:presence\.(room|watch|self)\.[0-9a-f]{{32}}"
        rf"|{lp}specific\.[0-9a-f]+!(\$inflight)?"
    )
