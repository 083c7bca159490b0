"""No observer ever learns more, or other, than the rules allow: a model-based test of who may
learn what, in two workspaces, with live changes, revocation and erasure.

Hypothesis builds random sites on the real Redis, in two workspaces (``TENANT``: "acme" and
"globex", named by the request's ``X-Workspace`` header or the socket's ``?ws=``) with every
user in both: online, away, do not disturb, invisible, gone (offline with a last seen) or never
seen in each, with a secret status text, emoji, metadata and device of that workspace; rooms
their connections are in, permanent rooms, last-seen privacy choices (reciprocal or not) and a
``LastSeen`` row, each of its workspace; an ``AUDIENCE`` relation (or none) and ``CAN_JOIN``
answers. The expectations come from tests/access/visibility_rules.py, a statement of the rules written
from the docs, never from the product's output. Compared with it:

1. every read, as every viewer (each user, a signed-out visitor, TRUSTED), in each workspace:
   ``get`` / ``get_many`` (state, status text, emoji, metadata, device, last seen exact or rough
   or none), ``online`` / ``online_count``, ``room_members`` / ``room_count`` (of a count-only
   room too: its list to TRUSTED reads only, its count as a signed-out visitor counts it) and
   ``room_sample`` (the faces: counted members the viewer sees online); the JSON API
   (users, online and its pages cursor by cursor, a room, its roster); the template tags
   (``{% presence_dot %}``, ``{% presence_of %}``, ``{% last_seen %}``, ``{% online_count %}``,
   ``{% online_users %}``, ``{% room_members %}``, ``{% room_roster %}``), with Redis away too
   (the rows of the workspace); the admin as staff who are not superusers (the LastSeen change list refused, the
   dashboard's rows, per-state counts and rooms through their own viewer);
2. live, in one workspace (the other one watching): the viewer's sockets (one watching
   everybody, one only in the rooms, an SSE stream, one in the other workspace) while the
   mover's three devices send status, typing and room-state frames interleaved, and their
   device in the other workspace too. Every frame is checked: an event's state, status text,
   emoji and time against the model; a typing or a room state only from a user the socket was
   told is online in that room, with a state it was told (or the true one); nothing of a room it
   is not in; nothing of the other workspace. After each step its consequences must arrive (the
   update, the leaves or joins, the probe typing and room state of a visible user), read up to
   markers (a ``send_to_user`` message, and a room state of the viewer's other socket in each
   room: whatever was sent before reaches the socket first). Three of the viewer's connections
   (a socket, the SSE stream, the other workspace's socket) and one of the mover's devices
   accept ``presence.diff`` (after a forged ``accept``, refused, and unknown types, ignored):
   each diff is read as the events it batches, under the same rules, up to a diff of the
   viewer's own update; a socket whose hello named no type it batches must get none. Every
   connection is in a count-only room (``COUNT_ONLY_ROOMS``; ``COUNT_SAMPLE`` 0 or 2): nothing
   of it but ``presence.count`` frames, no id in them but the sample's, each face a member the
   count counts and the viewer sees online, and after each step the count and sample the model
   has; typing and room states sent there are refused;
3. another process's late typing and room state (taken by the store while the mover was
   visible, delivered after they went invisible), and the store's own refusal of an invisible
   user's typing and room state, seen by a socket never told they are offline; and joins,
   updates, leaves, typing and room states sent by hand to the count-only room's groups,
   which no member gets;
4. revocation: each revoked connection gets ``forbidden``, then nothing of the room (room events
   queued behind the revoke and sent after it), up to the markers and in every later step; the
   room's members no longer list the viewer, and the mover's device hears the viewer leave;
5. erasure of the mover with their sockets open, then late writes in both workspaces (touch,
   a batch of touches, a status, a connection, a heartbeat): their sockets close (4401), nothing
   of them comes back; then every read of 1. again, and their rows and export are empty.

Which part catches which one-line leak (each put into a scratch copy of the product and seen
failing on the explicit example): invisible users' typing taken by the store (2: a device that
had not heard yet types, and the viewer gets a typing it was never told the state of; 3: the
socket never told gets it); room members ignoring ``AUDIENCE`` (1: room members as a policy
viewer); revoke leaving the user in the room (4: the room never hears the viewer leave, the
room's members); an offline event keeping its status text (2: the leave and update carry it);
``{% online_users %}`` showing invisible users (1: the tag against the model); room state
written to the default workspace (2: the markers' room states never arrive); typing relayed for
an invisible user (3: the late typing after the offline); a row read across workspaces (1: the
other workspace's privacy choice in every read, the other workspace's LastSeen row in
``{% last_seen %}``); a forget undone by a late touch (5: the erased user comes back online).
Of the count-only room and the diffs: its list read by anybody, its count or its sample's
count as the viewer counts, a sample not redacted for its viewer (it names the mover to
viewer 2) or keeping offline faces, a user's count-only rooms shown to others (1: the reads,
the dashboard's rows); a status change that does not mark the count-only rooms (2: the sample
shows the mover online after their dnd), a sample with ``COUNT_SAMPLE`` 0 (2: the second
example), diffs not redacted (2: an offline with its text), a typing sent before the diff
that shows its typist (2: the mover back from invisible), a hello that batches whatever it
names (2: the legacy socket gets diffs), sessions relaying a count-only room's events (3).

The default run is short (``VISIBILITY_MODEL_EXAMPLES`` raises the random examples,
``VISIBILITY_MODEL_SHRINK=1`` shrinks a failure); the explicit example below has every
ingredient each of those leaks needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
from collections import deque
from datetime import UTC, datetime
from urllib.parse import parse_qs

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Permission
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.template import Context, Template
from django.test import AsyncClient, Client, RequestFactory, override_settings
from hypothesis import HealthCheck, Phase, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from presence_app import presence, rooms, tenants
from presence_app.conf import DEFAULTS
from presence_app.core import dispatch
from presence_app.core.connection import get_async_store, get_store
from presence_app.failopen import breaker
from presence_app.jobs.touches import batcher
from presence_app.models import LastSeen, LastSeenPrivacy, RoomMembership
from presence_app.testing import RedisServer

from ..frame_waits import CLOSED
from ..users import create_user
from ..ws import FAST, Socket, shutdown
from .visibility_rules import ANY, SHOWN_ONLINE, TRUSTED, World

N = 4
WORKSPACES = ["acme", "globex"]
ROOMS = ["lobby", "den"]
#: A count-only room (``COUNT_ONLY_ROOMS``): its members learn its count, a sample at most.
STANDS = "stands"
ALL_ROOMS = [*ROOMS, STANDS]
KINDS = ["online", "idle", "dnd", "invisible", "gone", "never"]
PRIVACY = ["everyone", "audience", "nobody"]
EMOJI = ["☕", "🌙", "🎧", "📚"]
#: How long ago each workspace last saw its gone users (and wrote its LastSeen rows): a row read
#: in the wrong workspace reads otherwise, exactly and roughly ("2 hours ago", "recently";
#: "5 days ago", "within a week").
AGO = {"acme": 2 * 3600, "globex": 5 * 86400}
#: Generous: the machine may be loaded. Every wait ends at its event, never at its deadline.
WAIT = 30.0
EXAMPLES = int(os.environ.get("VISIBILITY_MODEL_EXAMPLES", "6"))
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
if os.environ.get("VISIBILITY_MODEL_SHRINK"):
    PHASES.append(Phase.shrink)
DASHBOARD = "/admin/presence_app/lastseen/dashboard/"
CHANGELIST = "/admin/presence_app/lastseen/"

#: The site under test, read by the hooks below: {viewer id or None: ids},
#: {(workspace, uid, room): bool}.
SITE: dict[str, dict] = {"relation": {}, "access": {}}


def audience_policy(viewer, user_ids):
    relation = SITE["relation"]
    return [u for u in user_ids if u in relation.get(viewer, set())]


def can_join(user, room):
    uid = str(getattr(user, "pk", ""))
    return SITE["access"].get((tenants.current(), uid, room), False)


def workspace_of(source):
    """A socket's ``?ws=``, a request's ``X-Workspace`` header (the admin's change list takes
    no unknown query parameter)."""
    if isinstance(source, dict):
        return parse_qs(source.get("query_string", b"").decode()).get("ws", [None])[0]
    return source.headers.get("X-Workspace") or None


def per_user(strategy):
    return st.lists(strategy, min_size=N, max_size=N)


def per_workspace(strategy):
    return st.fixed_dictionaries(dict.fromkeys(WORKSPACES, strategy))


room_sets = st.sets(st.sampled_from(ALL_ROOMS))
sites = st.fixed_dictionaries(
    {
        "kinds": per_workspace(per_user(st.sampled_from(KINDS))),
        "joined": per_workspace(per_user(room_sets)),
        "members": per_workspace(per_user(room_sets)),
        "privacy": per_workspace(per_user(st.tuples(st.sampled_from(PRIVACY), st.booleans()))),
        "relation": st.dictionaries(
            st.sampled_from([None, *range(N)]), st.sets(st.integers(0, N - 1)), max_size=N + 1
        ),
        "policy": st.booleans(),
        "reciprocal": st.booleans(),
        "access": per_workspace(per_user(room_sets)),
        "home": st.sampled_from(WORKSPACES),
        "sample": st.sampled_from([0, 2]),  # COUNT_SAMPLE
        "mover": st.integers(0, N - 1),
        # (device, state, whether the other devices' typing and room state go first)
        "bursts": st.lists(
            st.tuples(
                st.integers(0, 2), st.sampled_from(["auto", "dnd", "invisible"]), st.booleans()
            ),
            min_size=1,
            max_size=3,
        ),
    }
)

#: Every ingredient of the leaks the docstring lists: a policy under which viewer 2 is in the
#: lobby with the mover (0) but may not see them, the viewer (1) who sees the mover, an invisible
#: user (2) in the lobby, users seen in acme only (1, 3: their rows are acme's), a mover who
#: goes dnd, invisible and back with a status text; in the count-only room, the mover (whom a
#: signed-out visitor sees, so the count counts them and a sample may name them, but viewer 2
#: may not see) and the invisible user, and a sample of two faces.
EXPLICIT = {
    "kinds": {
        "acme": ["online", "online", "invisible", "gone"],
        "globex": ["dnd", "never", "online", "never"],
    },
    "joined": {
        "acme": [{"lobby", "stands"}, {"lobby", "den"}, {"lobby", "stands"}, {"den", "stands"}],
        "globex": [{"lobby", "stands"}, set(), {"lobby", "stands"}, set()],
    },
    "members": {
        "acme": [{"lobby"}, set(), {"lobby"}, {"lobby"}],
        "globex": [set(), {"lobby"}, {"lobby"}, {"lobby", "den"}],
    },
    "privacy": {
        "acme": [("everyone", False), ("everyone", False), ("audience", True), ("everyone", False)],
        "globex": [("everyone", False), ("nobody", False), ("everyone", True), ("audience", False)],
    },
    "relation": {0: {1, 3}, 1: {0, 2, 3}, 2: {1, 3}, 3: {0, 1, 2}, None: {0, 1, 3}},
    "policy": True,
    "reciprocal": False,
    "access": {
        "acme": [{"lobby", "den", "stands"}, {"lobby"}, {"lobby"}, {"den"}],
        "globex": [{"lobby", "stands"}, {"lobby", "den", "stands"}, set(), {"lobby", "den"}],
    },
    "home": "acme",
    "sample": 2,
    "mover": 0,
    "bursts": [(1, "dnd", True), (2, "invisible", False), (0, "auto", True)],
}


#: The same site without a policy, reciprocal, the mover hiding their last seen: each offline
#: of theirs reaches the viewer without its time, so two of them read alike (and each must come).
HIDDEN_SEEN = {
    **EXPLICIT,
    "privacy": {
        "acme": [("nobody", False), ("everyone", True), ("audience", True), ("nobody", False)],
        "globex": EXPLICIT["privacy"]["globex"],
    },
    "policy": False,
    "reciprocal": True,
    "sample": 0,
    "bursts": [(2, "invisible", True), (0, "auto", False), (1, "invisible", True)],
}


# -- the site --------------------------------------------------------------------------------
def build(site: dict, users: list, now: float) -> World:
    """The site in both workspaces, written through the front door, and the model of it."""
    ids = [str(u.pk) for u in users]
    relation = {
        (None if v is None else ids[v]): {ids[s] for s in subjects}
        for v, subjects in site["relation"].items()
    }
    access = {
        (ws, ids[i], room): room in allowed
        for ws in WORKSPACES
        for i, allowed in enumerate(site["access"][ws])
        for room in ALL_ROOMS
    }
    SITE["relation"], SITE["access"] = relation, access
    world = World(
        ids,
        [*WORKSPACES, None],
        policy=site["policy"],
        relation=relation,
        reciprocal=site["reciprocal"],
        access=access,
        count_only={STANDS},
        sample=site["sample"],
    )
    for ws in WORKSPACES:
        with tenants.activate(ws):
            for i, (user, uid) in enumerate(zip(users, ids, strict=True)):
                p, kind = world.person(ws, uid), site["kinds"][ws][i]
                visible_to, approximate = site["privacy"][ws][i]
                presence.set_privacy(user, visible_to, approximate)
                p.privacy = (visible_to, approximate)
                for room in sorted(site["members"][ws][i]):
                    rooms.add_member(user, room)
                    world.roster[ws].setdefault(room, []).append(uid)
                if kind == "never":
                    continue
                at = now - AGO[ws] if kind == "gone" else now
                conn, device = f"{uid}-{ws}", f"dev-{ws}-{uid}"
                presence.connect(conn, uid, now=at, device=device)
                world.connect(ws, uid, conn, device)
                if kind == "idle":
                    presence.activity(uid, now=now - 10_000)
                    presence.idle(uid, now=now)  # announced by the process that saw it stop
                    p.idle = True
                state = {"dnd": "dnd", "invisible": "invisible"}.get(kind)
                message, mood = f"secret-{ws}-{uid}", f"meta-{ws}-{uid}"
                presence.set_status(uid, state, message=message, emoji=EMOJI[i], now=at, mood=mood)
                world.set_status(ws, uid, state, message, EMOJI[i], at)
                p.meta = {"mood": mood}
                for room in sorted(site["joined"][ws][i]):
                    presence.join(room, conn, uid, now=at)
                    world.join(ws, uid, conn, room)
                if kind == "gone":
                    p.presence, p.conns, p.seen_at = "gone", {}, at
            presence.sweep(now=now)  # the gone users are swept: offline, with a last seen
            for i, user in enumerate(users):
                if site["kinds"][ws][i] != "never":
                    at = now - AGO[ws]
                    LastSeen.objects.update_or_create(
                        user=user, defaults={"last_seen_at": datetime.fromtimestamp(at, UTC)}
                    )
                    world.person(ws, ids[i]).row_at = at
    return world


# -- comparing one presence ------------------------------------------------------------------
def compare(expected: dict, actual: dict, where: tuple) -> None:
    """``actual`` (a presence's JSON shape, ``meta`` when the output has it) as the model says."""
    for key, want in expected.items():
        if want is ANY or key not in actual:
            continue
        got = actual[key]
        if key == "last_seen" and isinstance(want, tuple):
            assert got is not None and abs(got - want[1]) < 3, (*where, key, want, actual)
        else:
            assert got == want, (*where, key, want, actual)


def as_shape(p) -> dict:
    return {**p.as_dict(), "meta": p.meta}


def no_secrets(world: World, ws, viewer, text: str, where: tuple) -> None:
    """Whatever the output, no status text or metadata it may not tell, and nothing of another
    workspace's."""
    for other in WORKSPACES:
        for subject in world.ids:
            for secret in (f"secret-{other}-{subject}", f"meta-{other}-{subject}"):
                if other != ws:
                    assert secret not in text, (*where, "another workspace's", secret)
                elif not world.shows_status(ws, viewer, subject):
                    assert secret not in text, (*where, secret)


# -- 1. the reads ----------------------------------------------------------------------------
def as_viewer(viewer):
    if viewer == TRUSTED:
        return presence.TRUSTED
    return presence.ANONYMOUS if viewer is None else viewer


def observe_front_door(world: World, ws, viewer) -> None:
    v, now, where = as_viewer(viewer), time.time(), ("front door", ws, viewer)
    with tenants.activate(ws):
        found = presence.get_many(world.ids, viewer=v, activity=True)
        assert list(found) == world.ids, where
        for uid, p in found.items():
            compare(world.presence(ws, viewer, uid, now), as_shape(p), (*where, "get_many"))
            one = presence.get(uid, viewer=v)
            compare(world.presence(ws, viewer, uid, now), as_shape(one), (*where, "get"))
        online = world.online(ws, viewer)
        assert set(presence.online(viewer=v)) == online, (*where, "online")
        assert presence.online_count(viewer=v) == len(online), (*where, "online_count")
        for room in ALL_ROOMS:
            members = world.room_members(ws, viewer, room)
            assert set(presence.room_members(room, viewer=v)) == members, (*where, room)
            count = world.room_count(ws, viewer, room)
            assert presence.room_count(room, viewer=v) == count, (*where, room, "count")
        counted, sample = presence.room_sample(STANDS, 2, viewer=v)
        check_sample(world, ws, viewer, counted, [as_shape(p) for p in sample], 2, now, where)


def check_sample(world: World, ws, viewer, count, sample, size, now, where, moving=()) -> None:
    """A count-only room's count and sample as ``viewer`` gets them: the count a signed-out
    visitor counts; at most ``size`` faces, each a member the count counts whom the viewer sees
    online, as the viewer reads them (the ``moving`` user's read once the step settled)."""
    assert count == world.room_count(ws, None, STANDS), (*where, "count", count)
    assert len(sample) <= size, (*where, "sample", sample)
    if not world.policy or viewer == TRUSTED:  # every counted member is the viewer's to see
        assert len(sample) == min(size, count), (*where, "sample", count, sample)
    for m in sample:
        if m["user"] == viewer or m["user"] in moving:
            continue
        assert world.in_sample(ws, viewer, STANDS, m["user"]), (*where, "in the sample", m)
        compare(world.presence(ws, viewer, m["user"], now), m, (*where, "sample"))


def observe_api(world: World, ws, viewer, client: Client) -> None:
    """The JSON API (signed-in users only)."""
    now, where = time.time(), ("api", ws, viewer)
    answer = client.get("/presence/api/users/", {"ids": ",".join(world.ids)})
    assert answer.status_code == 200, (*where, answer.content)
    got = answer.json()["users"]
    assert [p["user"] for p in got] == world.ids, where
    for p in got:
        compare(world.presence(ws, viewer, p["user"], now), p, (*where, "users"))
    listed = client.get("/presence/api/online/", {"per_page": 100}).json()
    online = world.online(ws, viewer)
    assert {p["user"] for p in listed["results"]} == online, (*where, "online", listed)
    assert listed["count"] == len(online), (*where, "online count", listed)
    for p in listed["results"]:
        compare(world.presence(ws, viewer, p["user"], now), p, (*where, "online"))
    # Its pages, one user each, from cursor to cursor: the same users, each once.
    paged, query = [], {"per_page": 1}
    for _ in range(len(world.ids) + 1):
        page = client.get("/presence/api/online/", query).json()
        paged += [p["user"] for p in page["results"]]
        if page["next"] is None:
            break
        query = {"per_page": 1, "cursor": page["next"]}
    assert sorted(paged) == sorted(online), (*where, "online, page by page", paged)
    for room in ALL_ROOMS:
        # A live room list's names of those who join: of the members the viewer may list only.
        path = f"/presence/api/rooms/{room}/names/"
        response = client.get(path, {"ids": ",".join(world.ids)})
        if not world.may_join(ws, viewer, room):
            assert response.status_code == 403, (*where, path)
        else:
            assert response.status_code == 200, (*where, path, response.content)
            named = set(response.json()["names"])
            assert named == world.room_members(ws, viewer, room), (*where, path, named)
        for path in (f"/presence/api/rooms/{room}/", f"/presence/api/rooms/{room}/members/"):
            response = client.get(path)
            if not world.may_join(ws, viewer, room):
                assert response.status_code == 403, (*where, path)
                continue
            body = response.json()
            no_secrets(world, ws, viewer, response.content.decode(), (*where, path))
            if path.endswith("/members/"):  # the permanent members, offline ones too
                expected = world.permanent_members(ws, room)
                assert [m["user"] for m in body["members"]] == expected, (*where, path, body)
                assert body["count"] == len(expected), (*where, path, body)
                for m in body["members"]:
                    want = world.presence(ws, viewer, m["user"], now, durable=True)
                    compare(want, m, (*where, path))
            else:
                expected = world.room_members(ws, viewer, room)
                assert {m["user"] for m in body["members"]} == expected, (*where, path, body)
                count = world.room_count(ws, viewer, room)
                assert body["count"] == count, (*where, path, body)
                for m in body["members"]:
                    compare(world.presence(ws, viewer, m["user"], now), m, (*where, path))


TAGS = Template(
    "{% load presence %}{% presence_prefetch users %}"
    "{% for u in users %}{% presence_dot u %}{% presence_of u as p %}[{{ p.message }}|"
    "{{ p.emoji }}|{{ p.meta.mood }}|{{ p.device }}|{% last_seen u live=False %}];"
    "{% endfor %}§{% online_count %}§"
    "{% online_users as ou %}{% for u in ou %}{{ u.pk }},{% endfor %}§"
    "{% for r in rooms %}{% room_members r as ms %}{% for m in ms %}{{ r }}:{{ m.pk }},"
    "{% endfor %}{% endfor %}§{% for r in rooms %}{% room_roster r as rs %}{% for m in rs %}"
    "<{{ r }}/{{ m.presence.user_id }}/{{ m.presence.state }}/{{ m.last_seen|date:'U' }}/"
    "{{ m.presence.last_seen_approx }}>{% endfor %}{% endfor %}"
)
DOT = re.compile(r'presence-dot presence-(\w+)" data-presence-user="([^"]+)"')
ENTRY = re.compile(r"\[([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^\]]*)\];")
ROSTER = re.compile(r"<([^/>]+)/([^/>]+)/(\w+)/(\d*)/(\w*)>")


def said_ago(text: str, at: float) -> bool:
    """``text`` is "last seen <naturaltime of at>", give or take the seconds a render takes."""
    return any(
        text == f"last seen {naturaltime(datetime.fromtimestamp(at + d, UTC))}"
        for d in range(-1, 31)  # rendered up to 30 s before this check, on a loaded machine
    )


def observe_tags(world: World, ws, viewer, users: list, redis_away: bool = False) -> None:
    request = RequestFactory().get("/")
    request.user = next((u for u in users if str(u.pk) == viewer), AnonymousUser())
    with tenants.activate(ws):
        html = TAGS.render(Context({"request": request, "users": users, "rooms": ALL_ROOMS}))
    now, where = time.time(), ("tags (Redis away)" if redis_away else "tags", ws, viewer)
    no_secrets(world, ws, viewer, html, where)
    people, count, online, members, roster = html.split("§")
    dots = DOT.findall(people)
    assert [uid for _, uid in dots] == world.ids, (*where, html)
    for (state, uid), (message, emoji, mood, device, seen) in zip(
        dots, ENTRY.findall(people), strict=True
    ):
        want = world.presence(ws, viewer, uid, now, durable=True, redis_away=redis_away)
        got = {"state": state, "message": message, "emoji": emoji, "device": device}
        compare(want, got, (*where, uid))
        assert mood == want["meta"].get("mood", ""), (*where, uid, mood)
        text, at = world.last_seen_text(ws, viewer, uid, now, redis_away)
        if at is None:
            assert seen == text, (*where, uid, seen, text)
        else:
            assert said_ago(seen, at), (*where, uid, seen, at)
    shown = set() if redis_away else world.online(ws, viewer)
    assert int(count) == len(shown), (*where, "online_count", count, shown)
    assert set(filter(None, online.split(","))) == shown, (*where, "online_users", online)
    listed = {tuple(m.split(":")) for m in members.split(",") if m}
    expected = {
        (room, uid)
        for room in ALL_ROOMS
        if world.may_join(ws, viewer, room) and not redis_away
        for uid in world.room_members(ws, viewer, room)
    }
    assert listed == expected, (*where, "room_members", listed, expected)
    if redis_away:
        return  # the roster fails open to no members (it needs Redis for its presences)
    rows = ROSTER.findall(roster)
    expected_rows = [
        (room, uid)
        for room in ALL_ROOMS
        if world.may_join(ws, viewer, room)
        for uid in world.permanent_members(ws, room)
    ]
    assert [(r, u) for r, u, *_ in rows] == expected_rows, (*where, "room_roster", rows)
    for _room, uid, state, seen, approx in rows:
        want = world.presence(ws, viewer, uid, now, durable=True)
        assert state == want["state"] and approx == want["last_seen_approx"], (*where, uid, rows)
        if want["last_seen"] is None:
            assert seen == "", (*where, "roster last seen", uid, seen)
        elif isinstance(want["last_seen"], tuple):
            assert seen and abs(int(seen) - want["last_seen"][1]) < 3, (*where, uid, seen)


def observe_admin(world: World, ws, viewer, client: Client) -> None:
    """Staff who are not superusers: no LastSeen rows; the dashboard through their viewer."""
    where = ("admin", ws, viewer)
    assert client.get(CHANGELIST).status_code == 403, where
    page = client.get(DASHBOARD)
    assert page.status_code == 200, where
    want = world.dashboard(ws, viewer)
    rows = page.context["rows"]
    assert {row.user_id for row in rows} == want["rows"], (*where, "rows", rows)
    now = time.time()
    for row in rows:
        compare(world.presence(ws, viewer, row.user_id, now), as_shape(row.presence), where)
        shown = world.user_rooms(ws, viewer, row.user_id)
        expected = {r for r in shown if world.may_join(ws, viewer, r)}
        assert set(row.rooms) == expected, (*where, "rooms of", row.user_id, row.rooms)
    counts = page.context["counts"]
    got = {k: getattr(counts, k) for k in SHOWN_ONLINE}
    assert got == want["counts"], (*where, "counts", got, want["counts"])
    assert dict(page.context["rooms"]) == want["rooms"], (*where, "rooms", page.context["rooms"])
    if world.policy:
        assert page.context["chart"] is None, (*where, "the site's chart under a policy")
    no_secrets(world, ws, viewer, page.content.decode(), where)


def observe_all(world: World, users: list) -> None:
    """Every read, as every viewer, in every workspace (and the default space holds nobody)."""
    for ws in WORKSPACES:
        for viewer in [TRUSTED, None, *world.ids]:
            observe_front_door(world, ws, viewer)
            if viewer == TRUSTED:
                continue
            observe_tags(world, ws, viewer, users)
            if viewer is None:
                continue  # the JSON API and the admin answer signed-in users only
            client = Client(headers={"X-Workspace": ws})
            client.force_login(users[world.ids.index(viewer)])
            observe_api(world, ws, viewer, client)
            observe_admin(world, ws, viewer, client)
    observe_front_door(world, None, TRUSTED)


def observe_redis_away(world: World, users: list) -> None:
    """Redis away: the tags fall back to the LastSeen rows of the workspace."""
    server = RedisServer().start()
    try:
        with override_settings(PRESENCE={**settings.PRESENCE, "REDIS_URL": server.url}):
            get_store().ping()
            server.stop()
            for ws in WORKSPACES:
                for viewer in [None, *world.ids]:
                    observe_tags(world, ws, viewer, users, redis_away=True)
    finally:
        server.stop()
        breaker.reset()


# -- 2-5. live ---------------------------------------------------------------------------------
class Sock(Socket):
    WAIT_TIMEOUT = WAIT


class Stream:
    """The viewer's SSE stream, in process (the view a server runs), read as a socket is: its
    ``data:`` frames one by one; frames are sent as presence.js sends them, as REST calls."""

    def __init__(self, client: AsyncClient, response, ws: str, name: str) -> None:
        self.client, self.body, self.name = client, aiter(response.streaming_content), name
        self.pending: deque[dict] = deque()
        self.headers = {"X-Workspace": ws}

    @classmethod
    async def open(cls, user, ws: str, name: str) -> Stream:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.get("/presence/sse/", headers={"X-Workspace": ws})
        stream = cls(client, response, ws, name)
        hello = await stream.next(WAIT)
        assert hello["type"] == "hello", hello
        stream.headers["X-Presence-Stream"] = hello["stream"]
        return stream

    async def next(self, timeout: float) -> dict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.pending:
            chunk = await asyncio.wait_for(anext(self.body), max(0.0, deadline - loop.time()))
            for line in chunk.decode().splitlines():
                if line.startswith("data: "):
                    self.pending.append(json.loads(line[6:]))
        return self.pending.popleft()

    async def send(self, *, type: str, **fields) -> None:
        """A frame as a REST call; a refusal comes back as the socket's error frame would."""
        path = f"/presence/api/stream/{type}/"
        answer = await self.client.post(
            path, fields, content_type="application/json", headers=self.headers
        )
        if answer.status_code != 200:
            self.pending.append({**answer.json(), "room": fields.get("room")})

    async def close(self) -> None:
        await self.body.aclose()


class Observer:
    """One socket and what its frames told it: the state of each user, the rooms each is in,
    the rooms it is in itself. :meth:`check` holds each frame to the rules, in order."""

    def __init__(self, sock: Sock, ws, viewer: str, world: World, name: str) -> None:
        self.sock, self.ws, self.viewer, self.world, self.name = sock, ws, viewer, world, name
        self.told: dict[str, str] = {}
        self.before: dict[str, str] = {}  # what it was told of each user before that
        self.where: dict[str, set[str]] = {}
        self.rooms: set[str] = set()
        self.seen: list[dict] = []
        self.batched = False  # its hello accepted presence.diff
        self.count: dict | None = None  # the last presence.count of the count-only room
        self.moving: set[str] = set()  # whose state changes as the steps go (the mover)

    async def accept_diffs(self) -> None:
        """Its hello accepts ``presence.diff`` (after a forged one, refused, and unknown types,
        ignored): joins, leaves and updates come batched per tick."""
        await self.sock.send(type="hello", accept="presence.diff")
        await self.sock.send(type="hello", accept=["presence.members", "presence.diff", "x"])
        self.batched = True

    def count_is_true(self, f: dict | None) -> bool:
        """Is ``f`` the count-only room's count (and sample) as the model has it now?"""
        if f is None:
            return False
        try:
            w, where = self.world, (self.name, "count")
            sample = f.get("sample", [])
            check_sample(w, self.ws, self.viewer, f["count"], sample, w.sample, time.time(), where)
        except AssertionError:
            return False
        return True

    async def read_until(self, *wanted, timeout: float = WAIT) -> list[dict]:
        """Every frame up to (and with) one satisfying each predicate, in whatever order."""
        loop = asyncio.get_running_loop()
        deadline, frames, missing = loop.time() + timeout, [], list(wanted)
        while missing:
            try:
                frame = await self.sock.next(max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise AssertionError(
                    f"{self.name}: still waiting after {timeout} s; got {frames[-12:]}"
                ) from None
            frames.append(frame)
            self.seen.append(frame)
            missing = [w for w in missing if not w(frame)]
        return frames

    def check(self, frames: list[dict], step: str, exact: bool = True) -> None:
        """Each frame as the rules allow it at this point of the stream. ``exact``: the model
        says what each event about another user states (one status change in the step)."""
        w, ws, v = self.world, self.ws, self.viewer
        now = time.time()
        assert self.batched or not any_of(frames, is_diff), (self.name, step, "unasked diffs")
        for f in expand(frames):
            kind, room, subject = f["type"], f.get("room"), f.get("user")
            where = (self.name, step, f)
            if kind in ("hello", "heartbeat.ack", "presence.message", "error", CLOSED):
                continue
            assert room is None or room in self.rooms, ("a room it is not in", *where)
            if kind == "presence.count":
                self.count_frame(f, where)
                continue
            # a count-only room's members learn its count, nothing else of it (but their own
            # leave: the viewer's, when its last connection there goes)
            assert room not in w.count_only or subject == v, ("a count-only room's list", *where)
            if kind == "presence.state":
                listed = set()
                for m in f["members"]:
                    listed.add(m["user"])
                    self.told[m["user"]] = m["state"]
                    if m["user"] != v:  # their own socket is a sign of life: no longer idle
                        compare(w.presence(ws, v, m["user"], now), m, where)
                if room is not None:
                    for uid in w.ids:
                        here = self.where.setdefault(uid, set())
                        (here.add if uid in listed else here.discard)(room)
                    for entry in f.get("states", []):
                        assert entry["user"] in listed, ("the state of an unlisted user", *where)
                        self.state_entry(entry, room, where)
                continue
            if kind == "presence.roomstate":
                for entry in f["states"]:
                    self.state_entry(entry, room, where)
                continue
            if subject == v:
                continue  # about the viewer themself: the truth is theirs
            assert w.sees(v, subject), ("an event about a user outside the audience", *where)
            if kind == "presence.typing":
                told = self.told.get(subject)
                assert told in SHOWN_ONLINE and room in self.where.get(subject, ()), (
                    "a typing of a user not known online in the room",
                    *where,
                )
                # as it was told, or as it is now (a dnd typed at once may overtake the dnd's
                # own update), or as it was told before (a typing read before a dnd may come
                # after it, from another group): each true, none more than the viewer may learn
                was = [t for t in (told, self.before.get(subject)) if t in SHOWN_ONLINE]
                said = {"dnd" if t == "dnd" else "online" for t in was}
                said.add(w.typing_state(ws, v, subject))
                assert f["state"] in said, where
                continue
            if kind in ("presence.update", "presence.join", "presence.leave"):
                if f["state"] == "offline":  # offline (invisible): no status text
                    assert f["message"] == "" and f["emoji"] == "", ("offline with text", *where)
                    if w.last_seen_how(ws, v, subject) != "exact":
                        assert f["at"] is None, ("a last seen it may not tell", *where)
                if exact:
                    compare(w.event(ws, v, subject), f, where)
                if self.told.get(subject) != f["state"]:
                    self.before[subject] = self.told.get(subject, "")
                self.told[subject] = f["state"]
                if kind == "presence.join":
                    self.where.setdefault(subject, set()).add(room)
                elif kind == "presence.leave":
                    self.where.setdefault(subject, set()).discard(room)
                continue
            raise AssertionError(("a frame of no known kind", *where))
        # A count's faces are read on the tick: one read just before the mover's change may
        # arrive after it, true when read. Theirs are held to the model once the step settled.
        told = [self.without_moving(f) for f in frames if not f.get("self")]
        no_secrets(w, ws, v, json.dumps(told), (self.name,))

    def without_moving(self, f: dict) -> dict:
        if f["type"] != "presence.count" or "sample" not in f:
            return f
        return {**f, "sample": [m for m in f["sample"] if m["user"] not in self.moving]}

    def count_frame(self, f: dict, where: tuple) -> None:
        """A count-only room's count: no member's id but in its sample (with COUNT_SAMPLE), and
        each face one the count counts and the viewer sees online (the mover's, whose state
        the step is changing, once it settled: :meth:`count_is_true`)."""
        w, ws, v = self.world, self.ws, self.viewer
        keys = {"type", "room", "count"} | ({"sample"} if w.sample else set())
        assert set(f) - {"counted"} == keys, where
        if "counted" in f:  # a join's own count: do I count in it (as a visitor sees me)?
            assert f["counted"] is w.sees(None, v), where
        assert isinstance(f["count"], int) and f["count"] >= 0, where
        assert len(f.get("sample", [])) <= w.sample, where
        for m in f.get("sample", []):
            if m["user"] == v:
                continue
            assert w.sees(v, m["user"]), ("a face outside the audience", *where)
            if m["user"] not in self.moving:
                assert w.in_sample(ws, v, f["room"], m["user"]), ("a face it may not see", *where)
                compare(w.presence(ws, v, m["user"], time.time()), m, where)
        self.count = f

    def state_entry(self, entry: dict, room: str, where: tuple) -> None:
        subject = entry["user"]
        if subject == self.viewer:
            return  # the viewer's other connection
        assert self.world.sees(self.viewer, subject), ("a state of a hidden user", *where)
        if entry["data"] is None:
            return  # a removal
        assert self.told.get(subject) in SHOWN_ONLINE and room in self.where.get(subject, ()), (
            "a room state of a user not known online in the room",
            *where,
        )
        assert entry["data"].get("ws") == self.ws, ("another workspace's room state", *where)


def is_diff(f: dict) -> bool:
    return f["type"] == "presence.diff"


def expand(frames: list[dict]) -> list[dict]:
    """``frames`` with each ``presence.diff`` as the events it batches (docs/websocket.md): a
    room's ``left`` and ``joined`` members as its leaves and joins, ``updated`` as updates."""
    out = []
    for f in frames:
        if not is_diff(f):
            out.append(f)
            continue
        assert set(f) in ({"type", "room", "joined", "left"}, {"type", "updated"}), f
        room = {"room": f["room"]} if "room" in f else {}
        for key, kind in (("left", "leave"), ("joined", "join"), ("updated", "update")):
            out += [{**m, "type": f"presence.{kind}", **room} for m in f.get(key, [])]
    return out


def diff_says(user: str, message: str):
    """A diff telling ``user``'s update to ``message``."""
    return lambda f: (
        is_diff(f)
        and any(m["user"] == user and m["message"] == message for m in f.get("updated", []))
    )


def message_is(k: int):
    return lambda f: f["type"] == "presence.message" and f.get("payload") == {"marker": k}


def state_of(key: str, k: int, user: str | None = None, room: str | None = None):
    """A room-state frame (of ``room``) carrying the entry whose ``data[key]`` is ``k``."""
    return lambda f: (
        (f["type"] == "presence.roomstate" and (room is None or f["room"] == room))
        and any(
            isinstance(e.get("data"), dict)
            and e["data"].get(key) == k
            and (user is None or e["user"] == user)
            for e in f["states"]
        )
    )


def typing_of(user: str, room: str, state: str | None = None):
    return lambda f: (
        f["type"] == "presence.typing"
        and f["user"] == user
        and f["room"] == room
        and (state is None or f["state"] == state)
    )


def self_says(kind: str, message: str):
    return lambda f: f.get("self") is True and f["state"] == kind and f["message"] == message


def any_of(frames: list[dict], predicate) -> bool:
    return any(predicate(f) for f in frames)


class Live:
    """The live part: the viewer's sockets and the mover's devices in the home workspace, the
    viewer's and the mover's in the other one."""

    def __init__(self, world: World, site: dict, users: list, cookies: dict[str, str]) -> None:
        self.world, self.users, self.cookies = world, users, cookies
        ids = world.ids
        self.h = site["home"]
        self.o = next(ws for ws in WORKSPACES if ws != self.h)
        self.s, self.v = ids[site["mover"]], ids[(site["mover"] + 1) % N]
        self.k = 0

    async def open(self, uid: str, ws: str, name: str) -> Sock:
        sock = await Sock.open(self.cookies[uid], path=f"/ws/presence/?ws={ws}", name=name)
        self.world.connect(ws, uid, name)
        self.world.person(ws, uid).device = ANY  # which device shows is not the docs' to say
        await sock.send(type="activity")
        self.world.activity(ws, uid)
        return sock

    def observer(self, sock, ws, uid: str, name: str) -> Observer:
        obs = Observer(sock, ws, uid, self.world, name)
        obs.moving = {self.s, self.v}  # the mover, and the viewer: its markers change its text
        return obs

    async def join(self, obs: Observer, room: str) -> None:
        await obs.sock.send(type="join", room=room)
        if self.world.may_join(obs.ws, obs.viewer, room):
            kind = "presence.count" if room == STANDS else "presence.state"
            frames = await obs.read_until(lambda f: f["type"] == kind and f.get("room") == room)
            obs.rooms.add(room)
            self.world.join(obs.ws, obs.viewer, obs.name, room)
        else:
            frames = await obs.read_until(lambda f: f["type"] == "error" and f.get("room") == room)
            assert frames[-1]["code"] == "forbidden", frames[-1]
        obs.check(frames, f"join {room}", exact=False)

    async def status(self, obs: Observer, state: str | None, message: str | None) -> None:
        """A status frame on ``obs``'s socket (the model follows at once: the steps after it
        wait for its consequences)."""
        frame = {"type": "status"}
        if state is not None:
            frame["state"] = state
        if message is not None:
            frame["message"] = message
        await obs.sock.send(**frame)
        self.world.set_status(obs.ws, obs.viewer, state, message, None, time.time())

    async def settle(self, step: str, exact: bool = True) -> dict[str, list[dict]]:
        """Markers: the viewer's sockets publish a room state in each of their rooms and a
        message goes to the viewer in each workspace; each observer reads until its markers
        (the message, and its peer's state in each room they share). Whatever was sent (and
        acked) before reaches an observer before them: events of a group in order, a room's
        states in the same frame or an earlier one. Returns each observer's frames, checked."""
        self.k += 1
        k, out, rooms = self.k, {}, set(ROOMS)  # no room state in the count-only room
        for pub in (self.vh, self.vh2, self.vo2):
            for room in sorted(pub.rooms & rooms):
                await pub.sock.send(type="roomstate", room=room, data={"m": k, "ws": pub.ws})
        # And the viewer's own update, whose diff marks the batched sockets: it leaves with
        # every change queued before it, in the same frame or after it. (Set from Python: a
        # socket's status frame may meet its frame rate, and a refused one marks nothing.)
        for ws in (self.h, self.o):
            with tenants.activate(ws):
                await presence.asend_to_user(self.v, {"marker": k})
                await presence.aset_status(self.v, message=f"mark-{k}")
            self.world.set_status(ws, self.v, None, f"mark-{k}", None, time.time())
        for obs, peer in self.watchers():
            wanted = [message_is(k)]
            wanted += [state_of("m", k, self.v, r) for r in sorted(obs.rooms & peer.rooms & rooms)]
            if obs.batched:
                wanted.append(diff_says(self.v, f"mark-{k}"))
            frames = await obs.read_until(*wanted)
            obs.check(frames, step, exact=exact)
            if STANDS in obs.rooms and not obs.count_is_true(obs.count):
                # counts go on the membership tick: the count the model has now, in time
                more = await obs.read_until(lambda f: f["type"] == "presence.count")
                while not obs.count_is_true(more[-1]):
                    more += await obs.read_until(lambda f: f["type"] == "presence.count")
                obs.check(more, step, exact=False)
                frames += more
            out[obs.name] = frames
        return out

    def watchers(self) -> list[tuple[Observer, Observer]]:
        """Each observer and the socket whose room states mark its rooms."""
        pairs = [(self.vh, self.vh2), (self.vh2, self.vh), (self.vo, self.vo2), (self.vs, self.vh)]
        if self.vf is not None:
            pairs.append((self.vf, self.vh))
        return pairs

    async def acked(self, obs: Observer, **frame) -> None:
        """A frame, then a heartbeat: once acked, the frame was handled (in order)."""
        await obs.sock.send(**frame)
        await obs.sock.send(type="heartbeat")
        frames = await obs.read_until(lambda f: f["type"] == "heartbeat.ack")
        obs.check(frames, f"acked {frame['type']}", exact=False)

    # -- setup -------------------------------------------------------------------------------
    async def start(self) -> None:
        w, h, o, v, s = self.world, self.h, self.o, self.v, self.s
        for who in (v, s):  # both may enter every room of the home workspace, for the live part
            for room in ALL_ROOMS:
                w.access[(h, who, room)] = True
        # The viewer's connection of the build leaves its rooms: a revocation reaches sockets
        # and streams (its sessions), not a connection made by hand.
        with tenants.activate(h):
            me = w.person(h, v)
            for conn, joined in list(me.conns.items()):
                for room in sorted(joined):
                    await presence.aleave(room, conn, v)
                    w.leave(h, v, conn, room)
        self.vf = None
        self.vh = self.observer(await self.open(v, h, "vh"), h, v, "vh")
        self.vh2 = self.observer(await self.open(v, h, "vh2"), h, v, "vh2")
        self.vo = self.observer(await self.open(v, o, "vo"), o, v, "vo")
        self.vo2 = self.observer(await self.open(v, o, "vo2"), o, v, "vo2")
        stream = await Stream.open(self.users[w.ids.index(v)], h, "vs")
        self.vs = self.observer(stream, h, v, "vs")
        w.connect(h, v, "vs")
        for obs in (self.vh2, self.vo, self.vs):
            await obs.accept_diffs()
        # a hello naming no type this server batches: it keeps the first protocol's events
        await self.vh.sock.send(type="hello", accept=["presence.count", "presence.list"])
        for obs in (self.vh, self.vo):
            await self.status(obs, "auto", None)  # the viewer publishes its markers
            me = w.person(obs.ws, v)
            frames = await obs.read_until(self_says(me.kind, me.message))
            obs.check(frames, "the viewer's status", exact=False)
        for obs in (self.vh, self.vo, self.vs):
            await obs.sock.send(type="watch", users=w.ids)
            frames = await obs.read_until(lambda f: f.get("watch") is True)
            obs.check(frames, "watch", exact=False)
        for obs in (self.vh, self.vh2, self.vo, self.vo2, self.vs):
            for room in ALL_ROOMS if obs is not self.vo2 else ROOMS:
                await self.join(obs, room)
        self.devices = []
        for n in range(3):
            name = f"d{n + 1}"
            dev = self.observer(await self.open(s, h, name), h, s, name)
            if n == 1:
                await dev.accept_diffs()
            for room in ALL_ROOMS:
                await self.join(dev, room)
            self.devices.append(dev)
        self.do = self.observer(await self.open(s, o, "do"), o, s, "do")
        for room in ALL_ROOMS:
            await self.join(self.do, room)
        await self.settle("the sockets opened", exact=False)

    # -- 2. bursts ---------------------------------------------------------------------------
    async def burst(self, n: int, device: int, state: str, others_first: bool) -> None:
        """One status change on a device, interleaved with the others' typing and room state;
        then the probes, each of which must reach the viewer exactly when the model says."""
        w, h, o, v, s = self.world, self.h, self.o, self.v, self.s
        before = w.public(h, s)
        left_before = w.person(h, s).rooms
        message = f"live-{h}-{n}"
        changer = self.devices[device]
        typist = self.devices[(device + 1) % 3]
        painter = self.devices[(device + 2) % 3]
        others = [
            typist.sock.send(type="typing", room="lobby"),
            painter.sock.send(type="roomstate", room="lobby", data={"b": n, "ws": h}),
            self.do.sock.send(type="typing", room="lobby"),
            self.do.sock.send(type="roomstate", room="lobby", data={"b": n, "ws": o}),
            # refused (forbidden): nothing of them may reach anybody
            typist.sock.send(type="typing", room=STANDS),
            painter.sock.send(type="roomstate", room=STANDS, data={"b": n, "ws": h}),
        ]
        if others_first:
            await asyncio.gather(*others)
        await self.status(changer, state, message)
        if not others_first:
            await asyncio.gather(*others)
        truth = w.person(h, s)
        for dev in self.devices:  # each device knows its user's state before the probes
            frames = await dev.read_until(self_says(truth.kind, truth.message))
            dev.check(frames, f"burst {n}", exact=False)
        # Another device leaves the count-only room and comes back: counted only as the model
        # says (never while invisible, however many devices join).
        await typist.sock.send(type="leave", room=STANDS)
        await self.join(typist, STANDS)
        after = w.public(h, s)
        # The probes: sent once every device knows, each acked before the markers.
        await self.acked(typist, type="typing", room="lobby")
        await self.acked(painter, type="roomstate", room="lobby", data={"p": n, "ws": h})
        if "lobby" in self.do.rooms:
            await self.acked(self.do, type="typing", room="lobby")
            await self.acked(self.do, type="roomstate", room="lobby", data={"p": n, "ws": o})
        got = await self.settle(f"burst {n}: {state} on d{device + 1}")
        for obs in (self.vh, self.vh2, self.vs):
            frames = expand(got[obs.name])
            about = [f for f in frames if f.get("user") == s and f["type"] == "presence.update"]
            if obs is not self.vh2 and w.sees(v, s) and before != after:  # they watch everybody
                assert about, (obs.name, n, "no update of the mover", before, after, frames)
            typing = w.typing_state(h, v, s)
            if typing and "lobby" in obs.rooms:
                assert any_of(frames, typing_of(s, "lobby", typing)), (obs.name, n, frames)
            painted = w.publishes(h, s) and w.sees(v, s) and "lobby" in obs.rooms
            assert any_of(frames, state_of("p", n, s)) == painted, (obs.name, n, frames)
            if w.sees(v, s) and (before[0] == "offline") != (after[0] == "offline"):
                kind = "presence.leave" if after[0] == "offline" else "presence.join"
                rooms_ = {f["room"] for f in frames if f["type"] == kind and f["user"] == s}
                # (never of the count-only room: its count follows, on the tick)
                shared = (left_before & obs.rooms) - w.count_only
                assert rooms_ == shared, (obs.name, n, kind, frames)
        frames = got["vo"]
        typing = w.typing_state(o, v, s)
        both = "lobby" in self.do.rooms and "lobby" in self.vo.rooms
        assert any_of(frames, typing_of(s, "lobby", typing)) == bool(typing and both), frames
        painted = w.publishes(o, s) and w.sees(v, s) and both
        assert any_of(frames, state_of("p", n, s)) == painted, ("vo", n, frames)
        assert sum(typing_of(s, "lobby")(f) for f in frames) <= 2, ("vo", "typing", frames)

    # -- 3. late typing and room state -----------------------------------------------------
    async def late(self) -> None:
        w, h, v, s = self.world, self.h, self.v, self.s
        changer = self.devices[0]
        await self.status(changer, "auto", "late-on")
        truth = w.person(h, s)
        for dev in self.devices:
            frames = await dev.read_until(self_says(truth.kind, truth.message))
            dev.check(frames, "visible again", exact=False)
        await self.settle("visible again")
        # Another process of the mover: a connection in the lobby, and what it sent (the store
        # took it) while they were visible, delivered after they went invisible.
        with tenants.activate(h):
            await presence.aconnect("far", s)
            await presence.ajoin("lobby", "far", s)
            w.connect(h, s, "far")
            w.join(h, s, "far", "lobby")
            store = get_async_store()
            said = await store.typing("lobby", "far", s)
            entry = (s, "server", "", json.dumps({"late": 1, "ws": h}))
            taken = await store.set_room_states("lobby", [entry])
        assert said in ("online", "dnd") and taken, (said, taken)  # visible: both taken
        await self.status(changer, "invisible", "late-off")
        for dev in self.devices:
            frames = await dev.read_until(self_says("invisible", "late-off"))
            dev.check(frames, "invisible", exact=False)
        await self.settle("invisible")
        with tenants.activate(h):
            await dispatch.atyping("lobby", s, said, "")
            states = [{"user": s, "conn": "server", "data": {"late": 1, "ws": h}}]
            await dispatch.aroom_states("lobby", states)
            # What a sender that forgot the count-only rooms would send there, to the room's
            # group (a process's feed listens to it: none for such a room) and to its sockets'
            # group (presence_group_send's): each receiving session drops it, not only senders.
            layer, told = get_channel_layer(), {"state": "online", "message": "", "emoji": ""}
            about = {"user": s, "room": STANDS, "at": time.time()}
            forged = [{"type": f"presence.{k}", **about, **told} for k in ("join", "update")]
            forged.append({"type": "presence.typing", **about, "state": "online", "sender": ""})
            forged.append(dispatch.room_state_event(STANDS, states))
            forged.append({"type": "presence.leave", **about, **told})
            for group in (dispatch.room_group(STANDS), dispatch.sockets_group(STANDS)):
                for event in forged:
                    await layer.group_send(group, event)
        got = await self.settle("late typing and room state after the offline")
        for name in ("vh", "vh2", "vs"):
            frames = got[name]
            if w.sees(v, s):  # told offline: nothing of the far process reaches them
                assert not any_of(frames, typing_of(s, "lobby")), (name, frames)
                assert not any_of(frames, state_of("late", 1, s)), (name, frames)
        # A socket never told the mover is offline (it joins now: the room does not list
        # them): the store itself refuses their typing and room state.
        self.vf = self.observer(await self.open(v, h, "vf"), h, v, "vf")
        for room in ALL_ROOMS:
            await self.join(self.vf, room)
        with tenants.activate(h):
            typed = await presence.atyping("lobby", "far", s)
            stated = await presence.aset_room_state(s, "lobby", {"late": 2, "ws": h})
        got = await self.settle("an invisible user's typing and room state")
        assert not any_of(got["vf"], typing_of(s, "lobby")), ("vf", typed, got["vf"])
        assert not any_of(got["vf"], state_of("late", 2, s)), ("vf", stated, got["vf"])
        assert (typed, stated) == (False, False), "the store took an invisible user's"

    # -- 4. revocation ---------------------------------------------------------------------
    async def revoke(self) -> None:
        w, h, v, s = self.world, self.h, self.v, self.s
        d1, d2, d3 = self.devices
        await self.status(d1, "auto", "back")
        for dev in self.devices:
            frames = await dev.read_until(self_says(w.person(h, s).kind, "back"))
            dev.check(frames, "back", exact=False)
        await self.settle("back before the revocation")
        revoked = [obs for obs in (self.vh, self.vh2, self.vf, self.vs) if "lobby" in obs.rooms]
        uncounted = [obs for obs in (self.vh, self.vh2, self.vf, self.vs) if STANDS in obs.rooms]
        since = len(d1.seen)
        w.access[(h, v, "lobby")] = w.access[(h, v, STANDS)] = False
        with tenants.activate(h):
            await presence.arevoke(v, "lobby")
            await presence.arevoke(v, STANDS)  # no count of it after the forbidden
        # Room events at once, queued behind the revoke.
        await d2.sock.send(type="typing", room="lobby")
        await d3.sock.send(type="roomstate", room="lobby", data={"r": 1, "ws": h})
        await self.status(d1, "dnd", "during the revocation")
        for obs in revoked:
            frames = await obs.read_until(
                lambda f: f["type"] == "error" and f.get("room") == "lobby"
            )
            assert frames[-1]["code"] == "forbidden", (obs.name, frames[-1])
            obs.check(frames, "until forbidden")
            obs.rooms.discard("lobby")
            w.leave(h, v, obs.name, "lobby")
        for obs in uncounted:
            frames = await obs.read_until(
                lambda f: f["type"] == "error" and f.get("room") == STANDS
            )
            assert frames[-1]["code"] == "forbidden", (obs.name, frames[-1])
            obs.check(frames, "until forbidden")
            obs.rooms.discard(STANDS)
            w.leave(h, v, obs.name, STANDS)
        for dev in self.devices:
            frames = await dev.read_until(self_says("dnd", "during the revocation"))
            dev.check(frames, "revoked", exact=False)
        # More of the room after the forbidden; the mover's own device sees it all go out,
        # and sees the viewer leave.
        await d2.sock.send(type="typing", room="lobby")
        await d3.sock.send(type="roomstate", room="lobby", data={"r": 2, "ws": h})
        frames = await d1.read_until(typing_of(s, "lobby"), state_of("r", 2, s))
        d1.check(frames, "after the revocation", exact=False)
        if w.sees(s, v):  # the room heard the viewer leave (before or after these)
            left = [f for f in d1.seen[since:] if f["type"] == "presence.leave"]
            assert any(f["user"] == v and f["room"] == "lobby" for f in left), (
                "the room did not hear the revoked viewer leave",
                d1.seen[since:],
            )
        await self.settle("after the revocation")  # nothing of the lobby for the revoked
        with tenants.activate(h):
            for viewer in (TRUSTED, s):
                members = set(await presence.aroom_members("lobby", viewer=as_viewer(viewer)))
                assert members == w.room_members(h, viewer, "lobby"), (viewer, members)
                assert v not in members, "revoked, and still in the room"

    # -- 5. erasure ------------------------------------------------------------------------
    async def erase(self) -> None:
        w, h, o, v, s = self.world, self.h, self.o, self.v, self.s
        was_shown = w.shown_online(h, v, s)
        with tenants.activate(h):
            await presence.aforget(s)
        w.forget(s)
        for dev in (*self.devices, self.do):
            frames = await dev.read_until(lambda f: f["type"] == CLOSED)
            assert frames[-1]["code"] == 4401, (dev.name, frames[-1])
        # Late writes of other processes, in each workspace: a request's touch, another
        # process' batch, a status on its way, a connection, a heartbeat of the far one.
        for ws in (h, o):
            with tenants.activate(ws):
                await presence.atouch(s)
                await presence.atouch_many([(s, True)])
                await presence.aset_status(s, "dnd", message=f"late-{ws}")
                await presence.aconnect(f"late-{ws}", s)
                assert await presence.aheartbeat("far", s) is False
        got = await self.settle("erased", exact=False)
        frames = got["vh"]
        if was_shown:
            gone = [f for f in frames if f.get("user") == s and f["type"] == "presence.update"]
            assert gone and gone[0]["state"] == "offline", ("no offline of the erased", frames)
        for name, frames in got.items():
            back = [f for f in expand(frames) if f.get("user") == s and f.get("state") != "offline"]
            assert back == [], (name, "the erased user came back", back)

    async def run(self, bursts: list) -> None:
        await self.start()
        for n, (device, state, others_first) in enumerate(bursts):
            await self.burst(n, device, state, others_first)
        await self.late()
        await self.revoke()
        await self.erase()


def check_erased(world: World, uid: str) -> None:
    for model in (LastSeen, LastSeenPrivacy, RoomMembership):
        assert not model.all_workspaces.filter(user_id=uid).exists(), (model, "kept")
    assert presence.export(uid) == {"user": uid, "workspaces": {}}
    for ws in WORKSPACES:
        with tenants.activate(ws):
            p = presence.get(uid, viewer=presence.TRUSTED)
            assert (p.state, p.last_seen, p.message) == ("offline", None, ""), (ws, p)


@pytest.mark.django_db(transaction=True)
# An example takes 4 s alone and far more under make check's load (live sockets, every read as
# every viewer): the default run's session took 134 s at load 15, past the suite's 120 s a test.
@pytest.mark.timeout(60 * (EXAMPLES + 2))
@hsettings(
    max_examples=EXAMPLES,
    deadline=None,
    # An example takes seconds: a failure is reported as found (VISIBILITY_MODEL_SHRINK=1 to
    # shrink it), so that a failing run stays short too.
    phases=PHASES,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.long
@given(site=sites)
@example(site=EXPLICIT)
@example(site=HIDDEN_SEEN)
def test_no_observer_learns_more_than_the_model_allows(redis_client, django_user_model, site):
    redis_client.flushall()
    batcher.pending.clear()
    breaker.reset()
    for model in (LastSeen, LastSeenPrivacy, RoomMembership):
        model.all_workspaces.all().delete()
    django_user_model.objects.all().delete()
    users = [create_user(f"u{i}", is_staff=True) for i in range(N)]
    view = Permission.objects.get(codename="view_lastseen")
    for user in users:
        user.user_permissions.add(view)
    overrides = {
        **FAST,
        "LEASE_TTL": 600,  # nobody's lease runs out while the outputs are read
        # A loaded machine may keep Redis (or this loop) busy past the default 2 s: the test
        # waits for answers, it does not time the store.
        "REDIS_OPTIONS": {**DEFAULTS["REDIS_OPTIONS"], "socket_timeout": 30},
        "TYPING_THROTTLE": 0,
        "TENANT": "tests.access.test_visibility_model.workspace_of",
        "AUDIENCE": "tests.access.test_visibility_model.audience_policy"
        if site["policy"]
        else None,
        "CAN_JOIN": "tests.access.test_visibility_model.can_join",
        "LAST_SEEN_PRIVACY": True,
        "LAST_SEEN_RECIPROCAL": site["reciprocal"],
        "COUNT_ONLY_ROOMS": [STANDS],
        "COUNT_SAMPLE": site["sample"],
        "API_USER_RATE": 10_000,
        "API_USER_BURST": 10_000,
        "API_IP_RATE": 10_000,
        "API_IP_BURST": 10_000,
    }
    with override_settings(PRESENCE={**settings.PRESENCE, **overrides}):
        world = build(site, users, time.time())
        observe_all(world, users)
        observe_redis_away(world, users)
        cookies = {}
        for user in users:
            client = Client()
            client.force_login(user)
            cookies[str(user.pk)] = client.cookies[settings.SESSION_COOKIE_NAME].value
        channel_layers.backends.clear()

        live = Live(world, site, users, cookies)

        async def run() -> None:
            try:
                await live.run(site["bursts"])
                # Every read again, the erased user in them, the viewer's sockets still open.
                await sync_to_async(observe_all)(world, users)
            finally:
                if getattr(live, "vs", None) is not None:
                    with contextlib.suppress(Exception):
                        await live.vs.sock.close()
                await shutdown()

        async_to_sync(run)()
        channel_layers.backends.clear()
        check_erased(world, live.s)
