"""Access, against a real server: anonymous and cross-origin sockets are refused; a flood of
thousands of frames meets the per-socket rate limit and the room limit and leaves the store
consistent; the room-authorization hook (PRESENCE["CAN_JOIN"]) is honoured on the socket and
in the API; an invisible user shows through no event, tag, API answer or admin page, except to
superusers; the dashboard refuses non-staff."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from .clients import CLOSED, Client, Refused, close_all
from .conftest import eventually
from .settings import LOADED, TIMERS

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def timers():
    """Nothing here measures the lease or an outage: settings.LOADED, so that no socket is
    closed as silent while a loaded server works through the flood (3,000 frames handled in
    order before the flooder's first heartbeat: within the 3 s lease only on an idle
    machine), nor a join refused as ``unavailable`` for a late answer of Redis."""
    return LOADED


# -- refusals ---------------------------------------------------------------------------------
async def test_anonymous_and_cross_origin_sockets_are_refused(db, servers, store):
    alice = db.users(["alice"])["alice"]
    server = await servers.astart()
    # Anonymous (no cookie, a forged one): accepted, then closed with 4401 before any hello.
    for cookie in (None, "not-a-session"):
        anonymous = Client(server, None)
        if cookie:
            anonymous.user = type(alice)(id="", username="forged", session=cookie)
        await anonymous.connect(hello=False)
        frame = await anonymous.next(5)
        assert frame == {"type": CLOSED, "code": 4401}, frame
    # Cross-origin, or no Origin at all, with a valid session: the handshake is refused.
    # (What a browser sends from another site, a sandboxed frame ("null"), or a script.)
    for origin in (
        "http://evil.example",
        f"http://127.0.0.1.evil.example:{server.port}",
        f"http://localhost.evil.example:{server.port}",
        "null",
        None,
    ):
        with pytest.raises(Refused) as refused:
            await Client(server, alice, origin=origin).connect()
        assert refused.value.status == 403, origin
    # The same user from the right origin gets in; nobody else was ever online.
    ok = await Client(server, alice).connect()
    assert ok.hello["user"] == alice.id
    assert store.online() == [alice.id]
    await ok.close()


async def test_thousands_of_joins_meet_the_rate_and_room_limits(db, servers, store):
    users = db.users(["flooder", "neighbour"])
    server = await servers.astart()
    flooder = await Client(server, users["flooder"]).connect()
    neighbour = await Client(server, users["neighbour"]).connect()
    neighbour.beat(1.0)
    limits = flooder.hello["limits"]
    rate, frames = limits["frames_per_second"], 3000
    loop = asyncio.get_running_loop()
    started = loop.time()
    for i in range(frames):
        await flooder.send(type="join", room=f"flood-{i}")
    # Meanwhile another socket is served as usual.
    state = await neighbour.join("lobby", timeout=30)
    assert [m["user"] for m in state["members"]] == [neighbour.id]
    replies: list[dict] = []
    while len(replies) < frames:
        frame = await flooder.wait_any(10)
        if frame["type"] in ("presence.state", "error"):  # not the room's events
            replies.append(frame)
    elapsed = loop.time() - started
    # Heartbeats from now on, as presence.js sends them (a socket silent for LEASE_TTL is
    # closed), and under the rate with the paced joins below.
    flooder.beat(1.0)
    joined = [f["room"] for f in replies if f["type"] == "presence.state"]
    codes = [f["code"] for f in replies if f["type"] == "error"]
    assert len(joined) + len(codes) == frames  # one answer each (in the frames' order)
    # Refused by the rate, and by nothing else until the socket is in its room limit: a loaded
    # server takes seconds over the flood, its bucket refills meanwhile, and the joins it
    # then allows may reach the limit (where an idle one's flood is over in a second), past
    # which the limit refuses them (as the paced joins below show).
    assert "rate_limited" in codes
    joins = [i for i, f in enumerate(replies) if f["type"] == "presence.state"]
    full = joins[limits["rooms"] - 1] if len(joins) >= limits["rooms"] else len(replies)
    refused = [(i, f["code"]) for i, f in enumerate(replies) if f["type"] == "error"]
    assert {code for i, code in refused if i < full} <= {"rate_limited"}
    assert {code for i, code in refused if i > full} <= {"rate_limited", "limit"}
    print(
        f"{frames} joins in {elapsed:.2f} s: {len(joined)} joined, "
        f"{codes.count('rate_limited')} rate limited, {codes.count('limit')} past the room limit"
    )
    # A token bucket of `rate` a second, `rate` at most saved.
    assert rate <= len(joined) <= rate + rate * elapsed + 1
    assert set(store.user_rooms(flooder.id)) == set(joined)
    # Paced under the rate, joins go on up to the room limit, and no further.
    await asyncio.sleep(1.0)  # the bucket refills
    more = limits["rooms"] - len(joined) + 5
    paced: list[str] = []
    for i in range(more):
        answer = await flooder.reply(type="join", room=f"more-{i}")
        joined += [f["room"] for f in answer if f["type"] == "presence.state"]
        paced += [f["code"] for f in answer if f["type"] == "error"]
        await asyncio.sleep(2.5 / rate)  # the join and the barrier: under the rate
    assert len(joined) == limits["rooms"] and paced.count("limit") == 5
    assert set(store.user_rooms(flooder.id)) == set(joined)
    assert (await flooder.reply(type="leave", room=joined[0])) == []
    assert len(store.user_rooms(flooder.id)) == limits["rooms"] - 1
    assert server.tracebacks() == 0
    await close_all([flooder, neighbour])


# -- CAN_JOIN ----------------------------------------------------------------------------------
async def test_the_can_join_hook_is_honoured(db, servers, store):
    # tests/reliability/hooks.py: staff-* rooms for staff, closed-* rooms for nobody.
    users = db.users(["member"]) | db.users(["boss"], is_staff=True)
    server = await servers.astart()
    member, boss = [await Client(server, users[n]).connect() for n in ("member", "boss")]
    for client, room, allowed in [
        (member, "staff-room", False),
        (boss, "staff-room", True),
        (member, "closed-x", False),
        (boss, "closed-x", False),
        (member, "lobby", True),
    ]:
        answer = await client.reply(type="join", room=room)
        if allowed:
            assert [f["type"] for f in answer] == ["presence.state"], (client.name, room, answer)
        else:
            assert [(f["type"], f.get("code"), f.get("room")) for f in answer] == [
                ("error", "forbidden", room)
            ], (client.name, room, answer)
    assert store.room_members("staff-room") == [boss.id]
    assert store.room_members("closed-x") == []
    assert store.user_rooms(member.id) == ["lobby"]
    # A refused socket did not join the room's group either: it hears nothing of it.
    await boss.send(type="status", state="dnd")
    await boss.wait_for("presence.update", self=True, state="dnd")
    assert [f for f in member.drain() if f.get("room") == "staff-room"] == []
    # The JSON API asks the same hook.
    assert (await server.aget("/presence/api/rooms/staff-room/", users["member"]))[0] == 403
    status, body = await server.aget("/presence/api/rooms/staff-room/", users["boss"])
    assert status == 200 and [m["user"] for m in json.loads(body)["members"]] == [boss.id]
    await close_all([member, boss])


# -- invisible ---------------------------------------------------------------------------------
def dot_state(html: str, uid: str) -> list[str]:
    """The states of every presence dot of ``uid`` in a page."""
    return re.findall(rf'class="presence-dot presence-(\w+)" data-presence-user="{uid}"', html)


async def test_an_invisible_user_shows_nowhere_but_to_superusers(db, servers, store):
    users = (
        db.users(["ghost", "viewer"])
        | db.users(["clerk"], is_staff=True, permissions=["presence_app.view_lastseen"])
        | db.users(["intern"], is_staff=True)
        | db.users(["root"], is_staff=True, is_superuser=True)
    )
    server = await servers.astart()
    viewer = await Client(server, users["viewer"]).connect()
    viewer.beat(TIMERS["HEARTBEAT_INTERVAL"])
    await viewer.join("lobby")
    ghost_id = users["ghost"].id
    await viewer.send(type="watch", users=[ghost_id])
    await viewer.wait_for("presence.state", watch=True)

    # Seen while visible; then invisible: the public sees a leave and an offline.
    ghost = await Client(server, users["ghost"]).connect()
    ghost.beat(TIMERS["HEARTBEAT_INTERVAL"])
    await ghost.join("lobby")
    await viewer.wait_for("presence.join", user=ghost_id, room="lobby")
    await ghost.send(type="status", state="invisible")
    await ghost.wait_for("presence.update", self=True, state="invisible")
    await viewer.wait_all(
        ("presence.leave", {"user": ghost_id, "state": "offline"}),
        ("presence.update", {"user": ghost_id, "state": "offline"}),
    )
    # From now on nothing about the ghost reaches anybody else: a new tab, rooms, typing.
    viewer.drain()
    tab = await Client(server, users["ghost"]).connect()
    tab.beat(TIMERS["HEARTBEAT_INTERVAL"])
    assert tab.hello["me"]["state"] == "invisible"  # the ghost itself knows
    await tab.join("kitchen")
    await viewer.join("kitchen")
    await ghost.send(type="typing", room="lobby")
    await tab.send(type="activity")
    await asyncio.sleep(TIMERS["SWEEP_INTERVAL"] * 2)
    assert [f for f in viewer.drain() if f.get("user") == ghost_id] == []
    assert set(store.user_rooms(ghost_id)) == {"lobby", "kitchen"}  # it is there, hidden

    # The JSON API, as anybody else.
    viewer_user = users["viewer"]
    body = json.loads((await server.aget(f"/presence/api/users/?ids={ghost_id}", viewer_user))[1])
    assert [u["state"] for u in body["users"]] == ["offline"]
    online = json.loads((await server.aget("/presence/api/online/", viewer_user))[1])
    assert online["count"] == 1 and [u["user"] for u in online["results"]] == [viewer.id]
    for room in ("lobby", "kitchen"):
        members = json.loads((await server.aget(f"/presence/api/rooms/{room}/", viewer_user))[1])
        assert [m["user"] for m in members["members"]] == [viewer.id]
    # ... but the ghost sees itself.
    own = json.loads((await server.aget(f"/presence/api/users/?ids={ghost_id}", users["ghost"]))[1])
    assert [u["state"] for u in own["users"]] == ["invisible"]

    # The template tags: dots, counts, room members, the online list.
    for path in ("/", "/rooms/lobby/"):
        status, html = await server.aget(path, viewer_user)
        assert status == 200
        assert set(dot_state(html, ghost_id)) <= {"offline"}, path
    room_page = (await server.aget("/rooms/lobby/", viewer_user))[1]
    here = room_page.split('id="here"', 1)[1].split("</ul>", 1)[0]
    assert f'data-user="{ghost_id}"' not in here and f'data-user="{viewer.id}"' in here
    rooms_page = (await server.aget("/", viewer_user))[1]
    assert re.search(r'id="online-count">1<', rooms_page)
    # ... and the ghost's own page shows it invisible.
    assert set(dot_state((await server.aget("/rooms/lobby/", users["ghost"]))[1], ghost_id)) == {
        "invisible"
    }

    # The admin: staff with the view permission see no ghost; superusers do.
    dashboard = "/admin/presence_app/lastseen/dashboard/"
    status, html = await server.aget(dashboard, users["clerk"])
    assert status == 200
    assert f'data-user="{ghost_id}"' not in html and f'data-user="{viewer.id}"' in html
    assert "invisible" not in html.lower().split("<main", 1)[-1]
    status, html = await server.aget(dashboard, users["root"])
    assert status == 200 and f'data-user="{ghost_id}"' in html
    assert dot_state(html, ghost_id) == ["invisible"]
    changelist = "/admin/presence_app/lastseen/"
    html = (await server.aget(changelist, users["clerk"]))[1]
    assert set(dot_state(html, ghost_id)) <= {"offline"}
    html = (await server.aget(changelist, users["root"]))[1]
    assert dot_state(html, ghost_id) == ["invisible"]

    # The dashboard refuses non-staff (to the login page) and staff without the permission.
    status, _ = await server.aget(dashboard, viewer_user)
    assert status == 302
    assert (await server.aget(dashboard, users["intern"]))[0] == 403
    assert (await server.aget(dashboard))[0] == 302
    await close_all([viewer, ghost, tab])
    await eventually(
        lambda: store.online(include_invisible=True) == [],
        TIMERS["DISCONNECT_GRACE"] + TIMERS["SWEEP_INTERVAL"] + 3,
        "all gone",
    )
