"""No observer ever learns more than the model allows: a model-based test of who may learn what.

Hypothesis builds random sites on the real Redis: users online, away, do not disturb, invisible,
gone (offline with a last seen) or never seen, each with a secret status message and metadata;
random rooms, random AUDIENCE relations, random last-seen privacy choices (with and without
reciprocity) and a random CAN_JOIN for each user and room, some granted and then revoked. Every
output is then observed as each viewer (every user, and a signed-out visitor) gets it: each JSON
API endpoint, each template tag, the WebSocket's and the SSE stream's snapshots and events (live
changes and a revocation included),
the dashboard for non-superuser staff, and the fallbacks with Redis away. Each fact an output
states (a state, a status text, a last seen, a room's member) is checked against a plain model.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import UTC, datetime

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, Permission
from django.template import Context, Template
from django.test import AsyncClient, Client, RequestFactory, override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from presence_app import presence, rooms
from presence_app.core.connection import get_store
from presence_app.models import LastSeen
from presence_app.testing import RedisServer

from .ws import FAST, Socket, shutdown

N = 4
ROOMS = ["lobby", "den"]
KINDS = ["online", "idle", "dnd", "invisible", "gone", "never"]
PRIVACY = ["everyone", "audience", "nobody"]

#: The site under test, read by the hooks below: {viewer id or None: ids}, {(uid, room): bool}.
SITE: dict[str, object] = {"relation": {}, "access": {}}


def audience_policy(viewer, user_ids):
    relation = SITE["relation"]
    return [u for u in user_ids if u in relation.get(viewer, set())]


def can_join(user, room):
    return SITE["access"].get((str(getattr(user, "pk", "")), room), False)


sites = st.fixed_dictionaries(
    {
        "kinds": st.lists(st.sampled_from(KINDS), min_size=N, max_size=N),
        "rooms": st.lists(st.sets(st.sampled_from(ROOMS)), min_size=N, max_size=N),
        "relation": st.dictionaries(
            st.sampled_from([None, *range(N)]), st.sets(st.integers(0, N - 1)), max_size=N + 1
        ),
        "policy": st.booleans(),
        "privacy": st.lists(
            st.tuples(st.sampled_from(PRIVACY), st.booleans()), min_size=N, max_size=N
        ),
        "reciprocal": st.booleans(),
        "access": st.lists(st.sets(st.sampled_from(ROOMS)), min_size=N, max_size=N),
        "revoked": st.sets(st.tuples(st.integers(0, N - 1), st.sampled_from(ROOMS))),
        "mover": st.integers(0, N - 1),
    }
)


class Model:
    """Who may learn what, written plainly."""

    def __init__(self, site: dict, ids: list[str]) -> None:
        self.site, self.ids = site, ids
        self.kind = dict(zip(ids, site["kinds"], strict=True))
        self.choice = dict(zip(ids, site["privacy"], strict=True))

    def sees(self, viewer: str | None, subject: str) -> bool:
        if not self.site["policy"] or viewer == subject:
            return True
        index = None if viewer is None else self.ids.index(viewer)
        return self.ids.index(subject) in self.site["relation"].get(index, set())

    def state(self, viewer: str | None, subject: str) -> str:
        kind = self.kind[subject]
        if not self.sees(viewer, subject) or kind in ("gone", "never"):
            return "offline"
        if kind == "invisible":
            return "invisible" if viewer == subject else "offline"
        return kind

    def online(self, viewer: str | None, subject: str) -> bool:
        return self.state(viewer, subject) != "offline"

    def text(self, viewer: str | None, subject: str) -> bool:
        """May ``viewer`` read ``subject``'s status message?"""
        return viewer == subject or self.state(viewer, subject) in ("online", "idle", "dnd")

    def last_seen(self, viewer: str | None, subject: str) -> str:
        """How ``viewer`` may learn when ``subject`` was last seen: exact, approximate or no."""
        if viewer == subject:
            return "exact"
        if not self.sees(viewer, subject):
            return "no"
        visible_to, approximate = self.choice[subject]
        own = self.choice.get(viewer, ("everyone", False))[0] if viewer else "everyone"
        if self.site["reciprocal"] and own == "nobody":
            return "no"
        if visible_to == "nobody" or (visible_to == "audience" and viewer is None):
            return "no"
        return "approximate" if approximate else "exact"

    def may_join(self, viewer: str, room: str) -> bool:
        return SITE["access"].get((viewer, room), False)  # what CAN_JOIN answers now


def build(site: dict, users: list, redis_client) -> list[str]:
    redis_client.flushall()
    LastSeen.objects.all().delete()
    ids = [str(u.pk) for u in users]
    SITE["relation"] = {
        (None if v is None else ids[v]): {ids[s] for s in subjects}
        for v, subjects in site["relation"].items()
    }
    SITE["access"] = {
        (ids[i], room): room in allowed and (i, room) not in site["revoked"]
        for i, allowed in enumerate(site["access"])
        for room in ROOMS
    }
    now = time.time()
    for user, uid, kind, joined, (visible_to, approximate) in zip(
        users, ids, site["kinds"], site["rooms"], site["privacy"], strict=True
    ):
        presence.set_privacy(user, visible_to, approximate)
        if kind == "never":
            continue
        at = now - 1000 if kind == "gone" else now
        presence.connect(f"{uid}-c", uid, now=at)
        if kind == "idle":
            presence.activity(uid, now=now - 10_000)
            # idle is announced by the process that saw the activity stop
            presence.idle(uid, now=now)
        state = {"dnd": "dnd", "invisible": "invisible"}.get(kind)
        presence.set_status(uid, state, message=f"secret-{uid}", now=at, mood=f"meta-{uid}")
        for room in sorted(joined):
            presence.join(room, f"{uid}-c", uid, now=at)
            rooms.add_member(user, room)
        LastSeen.objects.update_or_create(
            user=user, defaults={"last_seen_at": datetime.fromtimestamp(at, UTC)}
        )
    presence.sweep(now=now)  # the gone users are swept: offline, with a last seen
    return ids


# -- the observers ------------------------------------------------------------------------------
def check_presence(model: Model, viewer: str | None, p: dict, where: str) -> None:
    """One presence as an output states it (the JSON shape)."""
    subject = p["user"]
    assert p["state"] == model.state(viewer, subject), (where, viewer, p)
    if not model.text(viewer, subject):
        assert p["message"] == "" and p["emoji"] == "", (where, viewer, p)
    how = model.last_seen(viewer, subject)
    if how != "exact" and not model.online(viewer, subject):
        assert p.get("last_seen") is None and p.get("last_active") is None, (where, viewer, p)
    if how == "no":
        assert not p.get("last_seen_approx"), (where, viewer, p)


def check_text(model: Model, viewer: str | None, text: str, where: str) -> None:
    """Whatever the output is, no secret it may not tell."""
    for subject in model.ids:
        if not model.text(viewer, subject):
            assert f"secret-{subject}" not in text, (where, viewer, subject)
        if viewer != subject:
            assert f"meta-{subject}" not in text or model.online(viewer, subject), (where, subject)


def observe_api(model: Model, viewer: str | None, client: Client) -> None:
    if viewer is None:
        return  # the JSON API answers signed-in users only (401)
    answer = client.get("/presence/api/users/", {"ids": ",".join(model.ids)}).json()
    for p in answer["users"]:
        check_presence(model, viewer, p, "api/users")
    listed = client.get("/presence/api/online/", {"per_page": 100}).json()
    assert {p["user"] for p in listed["results"]} == {
        s for s in model.ids if model.state(viewer, s) in ("online", "idle", "dnd")
    }
    for p in listed["results"]:
        check_presence(model, viewer, p, "api/online")
    for room in ROOMS:
        for path in (f"/presence/api/rooms/{room}/", f"/presence/api/rooms/{room}/members/"):
            response = client.get(path)
            if not model.may_join(viewer, room):
                assert response.status_code == 403, (path, viewer)
                continue
            for p in response.json()["members"]:
                check_presence(model, viewer, p, path)
            check_text(model, viewer, response.content.decode(), path)


TAGS = Template(
    "{% load presence %}{% presence_prefetch users %}"
    "{% for u in users %}{% presence_dot u %}{% presence_of u as p %}[{{ p.message }}|"
    "{{ p.meta.mood }}]{% last_seen u live=False %};{% endfor %}§{% online_count %}§"
    "{% online_users as ou %}{% for u in ou %}{{ u.pk }},{% endfor %}§"
    "{% for r in rooms %}{% room_members r as ms %}{% for m in ms %}{{ r }}:{{ m.pk }},"
    "{% endfor %}{% room_roster r as rs %}{% for m in rs %}<{{ m.presence.user_id }}/"
    "{{ m.presence.state }}/{{ m.last_seen|date:'U' }}>{% endfor %}{% endfor %}"
)
DOT = re.compile(r'presence-dot presence-(\w+)" data-presence-user="([^"]+)"')
ROSTER = re.compile(r"<([^/>]+)/(\w+)/(\d*)>")


def observe_tags(model: Model, viewer: str | None, users: list, redis_away: bool) -> None:
    request = RequestFactory().get("/")
    request.user = next((u for u in users if str(u.pk) == viewer), AnonymousUser())
    html = TAGS.render(Context({"request": request, "users": users, "rooms": ROOMS}))
    where = "tags (Redis away)" if redis_away else "tags"
    check_text(model, viewer, html, where)
    for state, subject in DOT.findall(html):
        assert state == ("offline" if redis_away else model.state(viewer, subject)), (where, html)
    for chunk, subject in zip(html.split("§")[0].split(";"), model.ids, strict=False):
        hidden = redis_away or not model.online(viewer, subject)
        if model.last_seen(viewer, subject) == "no" and hidden:
            assert "last seen" not in chunk, (where, viewer, chunk)
    for subject, state, seen in ROSTER.findall(html):
        assert state == ("offline" if redis_away else model.state(viewer, subject)), where
        hidden = redis_away or not model.online(viewer, subject)
        if model.last_seen(viewer, subject) != "exact" and hidden:
            assert seen == "", (where, viewer, subject)
    if not redis_away:
        count = int(html.split("§")[1])
        assert count == sum(model.state(viewer, s) in ("online", "idle", "dnd") for s in model.ids)


async def until(sock: Socket, frames: list, type: str, timeout: float = 5, **match) -> dict:
    """Reads every frame (kept in ``frames``) until one of ``type`` matching ``match``."""
    loop = __import__("asyncio").get_running_loop()
    deadline = loop.time() + timeout
    while True:
        frame = await sock.next(max(0.0, deadline - loop.time()))
        frames.append(frame)
        if frame["type"] == type and all(frame.get(k) == v for k, v in match.items()):
            return frame


async def observe_socket(model: Model, viewer: str, cookie: str, mover: str) -> None:
    sock = await Socket.open(cookie, name=f"viewer-{viewer}")
    frames = [sock.hello]
    await sock.send(type="watch", users=model.ids)
    await until(sock, frames, "presence.state", watch=True)
    joined = []
    for room in ROOMS:
        await sock.send(type="join", room=room)
        if model.may_join(viewer, room):
            await until(sock, frames, "presence.state", room=room)
            joined.append(room)
        else:
            assert (await until(sock, frames, "error", room=room))["code"] == "forbidden"
    # A live change: the mover says something secret, then goes invisible with it.
    await presence.aset_status(mover, None, message=f"secret-{mover}")
    await presence.aset_status(mover, "invisible", message=f"secret-{mover}")
    frames += await sock.collect(0.5)
    # Access revoked: out of the room at once, and nothing of it afterwards.
    after: list = []
    if joined:
        SITE["access"][(viewer, joined[0])] = False
        await presence.arevoke(viewer, joined[0])
        assert (await until(sock, after, "error", room=joined[0]))["code"] == "forbidden"
        await presence.aset_status(mover, "auto", message=f"secret-{mover}")
        after += await sock.collect(0.5)
        assert [f for f in after if f.get("room") == joined[0] and f["type"] != "error"] == [
            f for f in after if f["type"] == "presence.leave" and f.get("user") == viewer
        ]
    await sock.close()
    text = json.dumps(frames)
    check_text(model, viewer, text, "socket")
    for frame in frames + after:
        for p in frame.get("members", []):
            if p["user"] != viewer:  # their own socket is a sign of life: no longer idle
                check_presence(model, viewer, p, "socket snapshot")
        subject = frame.get("user")
        if frame.get("type", "").startswith("presence.") and subject and subject != viewer:
            assert model.sees(viewer, subject), ("socket event", viewer, frame)
            if frame.get("state") == "offline" and model.last_seen(viewer, subject) != "exact":
                assert frame.get("at") is None, ("socket event", viewer, frame)


async def observe_stream(model: Model, viewer: str, user, mover: str) -> None:
    """The SSE stream (in process: the same view a server runs), its snapshots and events."""
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get("/presence/sse/")
    body = aiter(response.streaming_content)
    frames: list = []

    async def until(type: str, **match) -> dict:
        while True:
            chunk = (await asyncio.wait_for(anext(body), 5)).decode()
            for line in chunk.splitlines():
                if line.startswith("data: "):
                    frames.append(frame := json.loads(line[6:]))
                    if frame["type"] == type and all(frame.get(k) == v for k, v in match.items()):
                        return frame

    hello = await until("hello")
    headers = {"X-Presence-Stream": hello["stream"]}

    async def post(frame_type: str, **fields) -> int:
        path = f"/presence/api/stream/{frame_type}/"
        answer = await client.post(path, fields, content_type="application/json", headers=headers)
        return answer.status_code

    assert await post("watch", users=model.ids) == 200
    await until("presence.state", watch=True)
    for room in ROOMS:
        status = await post("join", room=room)
        assert status == (200 if model.may_join(viewer, room) else 403), (room, status)
        if status == 200:
            await until("presence.state", room=room)
    await presence.aset_status(mover, None, message=f"secret-{mover}")
    await presence.aset_status(mover, "invisible", message=f"secret-{mover}")
    await post("typing", room=ROOMS[0])
    # The mover is offline now: whatever reached the stream came before the next keep-alive.
    await presence.aset_status(viewer, None, message=f"secret-{viewer}")
    await until("presence.update", self=True, message=f"secret-{viewer}")
    close = getattr(body, "aclose", None)  # the stream's end: its session closes
    if close is not None:
        await close()
    check_text(model, viewer, json.dumps([f for f in frames if not f.get("self")]), "sse")
    for frame in frames:
        for p in frame.get("members", []):
            if p["user"] != viewer:
                check_presence(model, viewer, p, "sse snapshot")
        subject = frame.get("user")
        if frame.get("type", "").startswith("presence.") and subject and subject != viewer:
            assert model.sees(viewer, subject), ("sse event", viewer, frame)


def observe_dashboard(model: Model, viewer: str, client: Client) -> None:
    page = client.get("/admin/presence_app/lastseen/dashboard/")
    assert page.status_code == 200
    listed = {row.user_id for row in page.context["rows"]}
    assert listed <= {s for s in model.ids if model.online(viewer, s)}, (viewer, listed)
    check_text(model, viewer, page.content.decode(), "dashboard")


@pytest.mark.django_db(transaction=True)
@hsettings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(site=sites)
def test_no_observer_learns_more_than_the_model_allows(redis_client, django_user_model, site):
    django_user_model.objects.all().delete()
    users = [django_user_model.objects.create_user(f"u{i}", is_staff=True) for i in range(N)]
    view = Permission.objects.get(codename="view_lastseen")
    for user in users:
        user.user_permissions.add(view)
    overrides = {
        **FAST,
        "LEASE_TTL": 60,  # nobody's lease runs out while the outputs are read
        "AUDIENCE": "tests.test_visibility_model.audience_policy" if site["policy"] else None,
        "CAN_JOIN": "tests.test_visibility_model.can_join",
        "LAST_SEEN_PRIVACY": True,
        "LAST_SEEN_RECIPROCAL": site["reciprocal"],
    }
    with override_settings(PRESENCE={**settings.PRESENCE, **overrides}):
        ids = build(site, users, redis_client)
        model = Model(site, ids)
        for viewer in [None, *ids]:
            client = Client()
            if viewer is not None:
                client.force_login(users[ids.index(viewer)])
            observe_api(model, viewer, client)
            observe_tags(model, viewer, users, redis_away=False)
            if viewer is not None:
                observe_dashboard(model, viewer, client)
        # The socket of one viewer, watching everybody, in every room it may join.
        viewer = ids[(site["mover"] + 1) % N]
        client = Client()
        client.force_login(users[ids.index(viewer)])
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value

        async def run() -> None:
            try:
                mover = ids[site["mover"]]
                await observe_stream(model, viewer, users[ids.index(viewer)], mover)
                model.kind[mover] = "invisible"  # the stream's observer hid them
                await observe_socket(model, viewer, cookie, mover)
            finally:
                await shutdown()

        async_to_sync(run)()
        # Redis away: the LastSeen fallbacks.
        server = RedisServer().start()
        with override_settings(PRESENCE={**settings.PRESENCE, "REDIS_URL": server.url}):
            get_store().ping()
            server.stop()
            for viewer in [None, *ids]:
                observe_tags(model, viewer, users, redis_away=True)
