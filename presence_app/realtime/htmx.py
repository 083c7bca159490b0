"""Presence for htmx pages, without presence.js: ``GET presence/sse/html/`` streams HTML.

htmx's SSE extension swaps each named event's data into the elements that ask for it, so a page
rendered by the server stays live with no JavaScript of its own::

    {% load presence %}
    <div hx-ext="sse" sse-connect="{% presence_sse_html_url rooms="lobby" users=people %}">
      {% for p in people %}
        <span sse-swap="presence-dot-{{ p.pk }}">{% presence_dot p %}</span> {{ p }}
        <span sse-swap="presence-seen-{{ p.pk }}">{% last_seen p live=False %}</span>
      {% endfor %}
      <span sse-swap="presence-count-lobby">…</span> here:
      <div sse-swap="presence-room-lobby">…</div>
    </div>

The stream is a connection like the JSON one (``presence_app.realtime.sse``: a lease, its rooms, the
watched users, the same ``AUDIENCE`` rules, resuming with ``Last-Event-ID``); ``?rooms=a,b``
are joined and ``?users=1,2`` watched when it opens. Its events, each an HTML fragment rendered
here with the same markup as the template tags:

- ``presence-dot-<user>``: the user's dot, on every change of their state or status;
- ``presence-seen-<user>``: "online now" / "last seen …";
- ``presence-room-<room>``: the room's members (dot and name), in the order they came;
- ``presence-count-<room>``: how many they are (a count-only room's live count);
- ``presence-typing-<room>``: who is typing there ("Bob is typing…"), each shown until
  :data:`TYPING_SHOWN` throttles after their last typing, a leave or their going offline;
- ``presence-roomstate-<room>``: the members' live room states (a cursor, "drafting a reply");
- ``presence-stream``: a hidden ``presence_stream`` input naming this stream, for the page's own
  ``hx-post`` calls of ``presence/api/stream/<frame>/`` (typing, room state, status: see
  :mod:`presence_app.realtime.rest`);
- ``presence-message``: a ``presence.send_to_user()`` payload, as JSON text.

The typing and room-state events are templates a project overrides as any app's
(``presence_app/htmx/typing.html`` and ``room_states.html``: each person's ``user``, ``name``
and presence, a state's ``conn`` and ``data``), since only the project knows what its states
mean.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from channels.db import database_sync_to_async
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.html import escape, format_html
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .. import conf
from ..core.rules import users_in_order
from ..markup import display_name, dot_html, last_seen_text
from ..store import Presence
from . import frames
from .rest import STREAM_FIELD
from .sse import EventStream, device_of, serve

#: At most this many rooms and users from the query string (the connection's own limits apply).
MAX_QUERY_ITEMS = 500
#: A ``presence.diff``'s lists, in the order they apply, and the event each member stands for.
DIFF_KEYS = (
    ("left", "presence.leave"),
    ("joined", "presence.join"),
    ("updated", "presence.update"),
)
#: The stream's own frame (never a browser's): a typist's time may have run out in ``room``.
TYPING_ENDED = "htmx.typing_ended"
#: A typist is shown this many ``TYPING_THROTTLE`` after their last typing: one more typing
#: from someone still at it is on its way, a throttle apart.
TYPING_SHOWN = 1.75


def presence_of(data: dict[str, Any]) -> Presence:
    """A frame's or a member's presence (``last_seen``; an event's ``at``)."""
    seen = data.get("last_seen", data.get("at"))
    return Presence(
        user_id=str(data.get("user", "")),
        state=data.get("state") or "offline",
        last_seen=seen if isinstance(seen, (int, float)) else None,
        message=data.get("message") or "",
        emoji=data.get("emoji") or "",
    )


def sse_event(name: str, html: str, event_id: str | None = None) -> str:
    """One named SSE event; every line of ``html`` a ``data:`` line."""
    name = name.replace("\n", " ").replace("\r", " ")
    head = f"id: {event_id}\n" if event_id else ""
    data = "".join(f"data: {line}\n" for line in (html.splitlines() or [""]))
    return f"{head}event: {name}\n{data}\n"


class LiveParts:
    """What an htmx stream shows of its rooms beside their members: who is typing (each until
    their time runs out) and the members' room states."""

    def __init__(self) -> None:
        self.typists: dict[str, dict[str, float]] = {}  # room -> user -> shown until (loop time)
        self.states: dict[str, dict[tuple[str, str], Any]] = {}  # room -> (user, conn) -> data
        self.touched: set[str] = set()  # rooms whose typists or states gone() changed

    def typing(self, room: str, now: float) -> list[str] | None:
        """Who types in ``room`` at ``now`` (None: nobody ever did, nothing to draw)."""
        if room not in self.typists:
            return None
        self.typists[room] = {u: t for u, t in self.typists[room].items() if t > now}
        return list(self.typists[room])

    def take_states(self, room: str, states: Any, snapshot: bool = False) -> None:
        """A snapshot's (its first page replaces) or an event's room states: ``data`` null is
        a removal."""
        known = self.states.setdefault(room, {})
        if snapshot:
            known.clear()
        for st in states or ():
            if isinstance(st, dict):
                key = (str(st.get("user", "")), str(st.get("conn", "")))
                if st.get("data") is None:
                    known.pop(key, None)
                else:
                    known[key] = st["data"]

    def gone(self, user: str, room: str | None) -> None:
        """``user`` left ``room`` (None: went offline, every room): their typing and room states
        there end, as presence.js ends them (the rooms it changed are :attr:`touched`)."""
        for name in [room] if room is not None else list(self.typists) + list(self.states):
            theirs = [k for k in self.states.get(name, {}) if k[0] == user]
            for key in theirs:
                del self.states[name][key]
            if self.typists.get(name, {}).pop(user, None) is not None or theirs:
                self.touched.add(name)


class HtmlEventStream(EventStream):
    """The SSE stream of ``presence_app.realtime.sse``, its frames rendered as htmx events."""

    def __init__(self, *args: Any, rooms: list[str], users: list[str], language: str | None,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.wanted_rooms = rooms
        self.wanted_users = users
        self.language = language
        self.members: dict[str, dict[str, Presence]] = {}  # room -> user -> presence
        self.names: dict[str, str] = {}
        self.live = LiveParts()
        # event name -> the HTML last sent under it. The opening sends each once: the hello,
        # the room's snapshot and the stream's own join event all say the same of its user
        # (and the snapshot and the join the same of the room), and each was sent 2-3 times.
        self.sent: dict[str, str] = {}
        self.session.accept(["presence.diff"])  # a tick's joins and leaves: one redraw

    async def start(self, resume: tuple[str, list[str]] | None) -> None:
        await super().start(resume)
        for room in self.wanted_rooms:
            error = await frames.apply(self.session, {"type": "join", "room": room})
            if error is not None:
                await self.push(error)
        if self.wanted_users:
            error = await frames.apply(self.session, {"type": "watch", "users": self.wanted_users})
            if error is not None:
                await self.push(error)

    async def encode(self, frame: dict[str, Any]) -> bytes:
        with translation.override(self.language):
            events = await self.render(frame)
        if not events:
            return b""
        event_id = self.next_id()
        # What the page shows already is not sent again (a swap of the same HTML is a no-op).
        events = [(name, html) for name, html in events if self.sent.get(name) != html]
        self.sent.update(events)
        if not events:
            # An id alone still moves the browser's Last-Event-ID (the rooms to resume).
            return f"id: {event_id}\n\n".encode() if event_id else b""
        out = [sse_event(name, html, event_id if i == 0 else None) for i, (name, html) in
               enumerate(events)]  # fmt: skip
        return "".join(out).encode()

    async def render(self, frame: dict[str, Any]) -> list[tuple[str, str]]:
        kind = frame.get("type")
        if kind == "hello":
            me = frame.get("me")
            out = self.user_events(presence_of(me)) if isinstance(me, dict) else []
            if isinstance(frame.get("stream"), str):
                field = '<input type="hidden" name="{}" value="{}">'
                out.append(("presence-stream", format_html(field, STREAM_FIELD, frame["stream"])))
            return out
        if kind == "presence.state":
            members = [presence_of(m) for m in frame.get("members", []) if isinstance(m, dict)]
            out = [e for p in members for e in self.user_events(p)]
            room = frame.get("room")
            if isinstance(room, str):
                known = self.members.setdefault(room, {})
                if not frame.get("page"):
                    known.clear()
                known.update((p.user_id, p) for p in members)
                self.live.take_states(room, frame.get("states"), snapshot=not frame.get("page"))
                if not frame.get("more"):
                    out += await self.room_events(room) + await self.states_events(room)
            return out
        if kind in ("presence.join", "presence.leave", "presence.update", "presence.diff"):
            # A diff (a tick's changes, which this stream accepts) is each of its members
            # applied as its own event, and each room it changed drawn once.
            changes = [(str(kind), frame)] if kind != "presence.diff" else [
                (event, {**m, "room": frame.get("room")})
                for key, event in DIFF_KEYS
                for m in frame.get(key) or ()
                if isinstance(m, dict)
            ]  # fmt: skip
            out, changed = [], {}
            for event, change in changes:
                out += self.apply(event, change, changed)
            for name in changed:
                out += await self.room_events(name)
            touched, self.live.touched = self.live.touched, set()
            for name in touched:  # redrawn only where a leave or an offline ended a part
                out += await self.typing_events(name) + await self.states_events(name)
            return out
        if kind == "presence.count" and isinstance(frame.get("room"), str):
            # A count-only room: its count, and its list is the sample (if any).
            room = frame["room"]
            sample = [presence_of(m) for m in frame.get("sample") or () if isinstance(m, dict)]
            self.members[room] = {p.user_id: p for p in sample}
            listed, _ = await self.room_events(room)
            out = [e for p in sample for e in self.user_events(p)]
            return [*out, listed, (f"presence-count-{room}", str(int(frame.get("count") or 0)))]
        if kind == "presence.typing" and isinstance(frame.get("room"), str):
            room, user = frame["room"], str(frame.get("user", ""))
            wait = float(conf.get("TYPING_THROTTLE")) * TYPING_SHOWN
            loop = asyncio.get_running_loop()
            self.live.typists.setdefault(room, {})[user] = loop.time() + wait
            # No browser code to end it: the stream's own queue asks for the redraw.
            loop.call_later(wait, self.queue.put_nowait, {"type": TYPING_ENDED, "room": room})
            return await self.typing_events(room)
        if kind == TYPING_ENDED and isinstance(frame.get("room"), str):
            return await self.typing_events(frame["room"])
        if kind == "presence.roomstate" and isinstance(frame.get("room"), str):
            self.live.take_states(frame["room"], frame.get("states"))
            return await self.states_events(frame["room"])
        if kind == "presence.message":
            return [("presence-message", escape(json.dumps(frame.get("payload"))))]
        return []  # errors, acks: nothing to swap

    def apply(
        self, kind: str, frame: dict[str, Any], changed: dict[str, None]
    ) -> list[tuple[str, str]]:
        """A join, leave or update applied to the rooms' members (``changed`` gets the rooms
        it changed); its user's events returned."""
        p = presence_of(frame)
        if p.state == "offline" and p.last_seen is None and not p.last_seen_approx:
            # gone, its time withheld (their last seen is hidden from this viewer): the
            # page says "offline", not the "online now" it showed beside a grey dot
            p = replace(p, last_seen_approx="hidden")
        room = frame.get("room")
        if kind == "presence.join" and isinstance(room, str):
            self.members.setdefault(room, {})[p.user_id] = p
        elif kind == "presence.leave" and isinstance(room, str):
            self.members.get(room, {}).pop(p.user_id, None)
            self.live.gone(p.user_id, room)
        if isinstance(room, str) and room in self.members:
            changed[room] = None
        if kind == "presence.update":
            if not p.is_online:
                self.live.gone(p.user_id, None)
            for name, known in self.members.items():
                if p.user_id in known:
                    known[p.user_id] = p
                    changed[name] = None
        return self.user_events(p)

    def user_events(self, p: Presence) -> list[tuple[str, str]]:
        if not p.user_id:
            return []
        out = [(f"presence-dot-{p.user_id}", str(dot_html(p)))]
        if p.is_online or p.last_seen is not None or p.last_seen_approx:
            out.append((f"presence-seen-{p.user_id}", escape(last_seen_text(p))))
        return out

    async def name(self, user_ids: list[str]) -> None:
        """Learns the names of ``user_ids`` it does not know yet, in one query."""
        missing = [uid for uid in dict.fromkeys(user_ids) if uid not in self.names]
        if missing:
            self.names.update(await database_sync_to_async(names_of)(missing))

    async def room_events(self, room: str) -> list[tuple[str, str]]:
        """The room's list and count."""
        members = list(self.members.get(room, {}).values())
        await self.name([p.user_id for p in members])
        items = "".join(
            f'<li class="presence-roster-member presence-{"online" if p.is_online else "offline"}"'
            f' data-presence-member="{escape(p.user_id)}">{dot_html(p)} '
            f'<span class="presence-roster-name">{escape(self.names.get(p.user_id, p.user_id))}'
            "</span></li>"
            for p in members
        )
        return [
            (f"presence-room-{room}", f'<ul class="presence-roster">{items}</ul>'),
            (f"presence-count-{room}", str(len(members))),
        ]

    async def typing_events(self, room: str) -> list[tuple[str, str]]:
        """Who is typing in the room now (those whose time ran out left out)."""
        typists = self.live.typing(room, asyncio.get_running_loop().time())
        if typists is None:
            return []
        await self.name(typists)
        people = [self.person(room, uid) for uid in typists]
        html = render_to_string("presence_app/htmx/typing.html", {"room": room, "typists": people})
        return [(f"presence-typing-{room}", html)]

    async def states_events(self, room: str) -> list[tuple[str, str]]:
        """The members' room states, in the order they were set."""
        if room not in self.live.states:
            return []
        await self.name([user for user, _ in self.live.states[room]])
        states = [
            {**self.person(room, user), "conn": conn, "data": data, "json": json.dumps(data)}
            for (user, conn), data in self.live.states[room].items()
        ]
        html = render_to_string(
            "presence_app/htmx/room_states.html", {"room": room, "states": states}
        )
        return [(f"presence-roomstate-{room}", html)]

    def person(self, room: str, user: str) -> dict[str, Any]:
        """A template's person: ``user`` (the id), ``name``, ``presence`` (None if unknown)."""
        return {
            "user": user,
            "name": self.names.get(user, user),
            "presence": self.members.get(room, {}).get(user),
        }


def names_of(user_ids: list[str]) -> dict[str, str]:
    """Display names of users, in one query; ids without a user keep their id."""
    found = {str(u.pk): display_name(u) for u in users_in_order(user_ids)}
    return {uid: found.get(uid, uid) for uid in user_ids}


def _listed(request: HttpRequest, name: str) -> list[str]:
    values = ",".join(request.GET.getlist(name))
    return [v for v in dict.fromkeys(v.strip() for v in values.split(",")) if v][:MAX_QUERY_ITEMS]


@never_cache
@require_GET
async def stream(request: HttpRequest) -> HttpResponse:
    """``GET presence/sse/html/?rooms=a,b&users=1,2``: presence as HTML events for htmx."""
    return await serve(
        request,
        lambda user, layer, channel: HtmlEventStream(
            user,
            layer,
            channel,
            device_of(request),
            get_token(request),
            rooms=_listed(request, "rooms"),
            users=_listed(request, "users"),
            language=translation.get_language(),
        ),
    )
