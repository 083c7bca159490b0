"""Redis goes away under a real server (uvicorn, a subprocess) with real sockets connected, then
comes back empty, as a Redis restart without persistence does.

While it is away: pages are served (200), every socket is told (an ``unavailable`` error frame;
none is dropped), and the server logs a few throttled warnings, no tracebacks. When it is back:
every still connected user is present again, in their rooms, within one heartbeat interval
(the next heartbeat finds its lease missing; the socket takes it again and re-joins), an
invisible user stays invisible and a busy one busy, and events flow again through the channel
layer's restored groups. With ``PERMANENT_ROOMS`` on, a socket opened during the outage is in
its permanent room once Redis is back, unasked.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.timing import limit, said

from .clients import CLOSED, Client, close_all, connect_all
from .conftest import eventually
from .settings import TIMERS

pytestmark = pytest.mark.timeout(90)

USERS = 30
ROOMS = ("kitchen", "garden")
HEARTBEAT = TIMERS["HEARTBEAT_INTERVAL"]
#: The promise: healed within one heartbeat interval, plus the flush that writes it (the round
#: trips of taking the lease and the rooms again are within the slack, tests/timing.py).
HEAL = HEARTBEAT + TIMERS["HEARTBEAT_FLUSH_INTERVAL"]


MEMBERSHIP = """
import django
django.setup()
from presence_app.models import RoomMembership
RoomMembership.objects.create(user_id={user}, room="attic")
"""


@pytest.mark.parametrize("layer", ["pubsub", "core"])
async def test_redis_outage_fails_open_and_a_restart_heals_within_a_heartbeat(
    redis_server, db, servers, store, layer
):
    users = db.users([f"user{i}" for i in range(USERS)] + ["late"])
    late_user = users.pop("late")
    # The late user is a member of a permanent room: their socket joins it unasked, which
    # during the outage is refused, and is owed until Redis is back (presence.js never asked
    # for that room, so it never asks again).
    db.run(["-c", MEMBERSHIP.format(user=late_user.id)])
    overrides = json.dumps({"PERMANENT_ROOMS": True})
    server = await servers.astart(env={"RELIABILITY_LAYER": layer, "PRESENCE_OVERRIDES": overrides})
    clients = await connect_all(server, users.values())
    rooms: dict[str, set[str]] = {"lobby": set(), **{r: set() for r in ROOMS}}
    for i, client in enumerate(clients):
        client.beat(HEARTBEAT)
        for room in ("lobby", ROOMS[i % len(ROOMS)]):
            await client.join(room)
            rooms[room].add(client.id)
    everybody = {c.id for c in clients}
    # One of them is invisible, one on do-not-disturb: what they set must survive the restart.
    ghost, busy = clients[-1], clients[-2]
    await ghost.send(type="status", state="invisible")
    await busy.send(type="status", state="dnd")
    await ghost.wait_for("presence.update", self=True, state="invisible")
    await busy.wait_for("presence.update", self=True, state="dnd")
    visible = {room: members - {ghost.id} for room, members in rooms.items()}

    def all_present() -> bool:
        return (
            everybody <= set(store.online(include_invisible=True))
            and ghost.id not in store.online()
            and all(set(store.room_members(room)) == members for room, members in visible.items())
        )

    await eventually(all_present, 30, "everybody online and in their rooms")
    for client in clients:
        client.drain()

    # -- Redis goes away ------------------------------------------------------------------------
    redis_server.stop()
    # Every socket is told, none is dropped (1006).
    errors = await asyncio.gather(
        *(c.wait_for("error", timeout=30, code="unavailable") for c in clients)
    )
    assert len(errors) == USERS
    assert all(c.open for c in clients)
    # Pages are served: the middleware, the template tags and the room page fail open.
    for path in ("/", "/rooms/lobby/"):
        status, body = await asyncio.to_thread(server.get, path, users["user0"])
        assert status == 200, (path, body[:500])
    assert (await asyncio.to_thread(server.get, "/accounts/login/"))[0] == 200
    # The JSON API answers 503 (pages poll it: twenty polls must not be twenty log lines).
    for _ in range(20):
        reply = await asyncio.to_thread(server.get, "/presence/api/online/", users["user0"])
        assert reply[0] == 503
    # A socket opened during the outage is told: accepted with an `unavailable` error frame
    # (RedisChannelLayer), or closed cleanly with 1013, try again later (the pub/sub layer
    # needs Redis to give the socket a channel at all).
    late = Client(server, late_user)
    await late.connect(hello=False)
    first = await late.wait_any_or_close(30)
    if first["type"] == CLOSED:
        assert first["code"] == 1013
    else:
        assert (first["type"], first["code"]) == ("error", "unavailable")
        late.hello = await late.wait_for("hello")
        assert late.hello["me"] is None
        await late.send(type="join", room="lobby")
        error = await late.wait_for("error", room="lobby")
        assert (error["code"], error["frame"]) == ("unavailable", "join")
        late.beat(HEARTBEAT)
    # Outlast a few heartbeat flushes and sweeps (each fails), and a lease: a duration the
    # outage must have, not a wait for something to happen.
    await asyncio.sleep(TIMERS["LEASE_TTL"])
    assert all(c.open for c in clients)

    # -- Redis is back, empty ---------------------------------------------------------------------
    # It has no persistence: it comes back empty (checking that here would race the heal,
    # which starts within one heartbeat flush)...
    await asyncio.to_thread(redis_server.start)
    healed = await eventually(all_present, limit(HEAL), "everybody back in their rooms")
    print(said("present again", healed, HEAL), "after Redis came back")
    # ... and each socket was sent its rooms' state again. The invisible user stayed hidden
    # (nobody heard of it coming back), the busy one busy.
    for client in clients:
        await client.wait_for("presence.state", timeout=limit(HEAL), room="lobby")
    assert store.get(ghost.id, viewer=ghost.id).state == "invisible"
    assert store.get(ghost.id).state == "offline"
    assert store.get(busy.id).state == "dnd"
    await asyncio.sleep(TIMERS["SWEEP_INTERVAL"])  # a window for a stray event: none may come
    assert [
        f for c in clients if c is not ghost for f in c.drain() if f.get("user") == ghost.id
    ] == []
    # The late socket: reconnected (as presence.js does after a close), or its lease taken by
    # its first heartbeat; then presence.js' retry of the join goes through, and the room hears
    # of it over the channel layer's restored groups.
    if not late.open:
        await late.connect()
        late.beat(HEARTBEAT)
    await eventually(lambda: late_user.id in store.online(), limit(HEAL), "the late socket")
    await late.wait_for("presence.state", timeout=limit(HEAL), room="attic")  # unasked
    assert store.room_members("attic") == [late.id]
    for client in clients:
        client.drain()
    state = await late.join("lobby")
    assert {m["user"] for m in state["members"]} == everybody - {ghost.id} | {late.id}
    await asyncio.gather(
        *(c.wait_for("presence.join", user=late.id, room="lobby") for c in clients)
    )
    await clients[0].send(type="status", state="dnd", message="back")
    await asyncio.gather(
        *(c.wait_for("presence.update", user=clients[0].id, state="dnd") for c in clients[1:])
    )

    await close_all([*clients, late])
    # The outage cost a handful of throttled warnings, and not one traceback.
    log = server.log(None)
    assert server.tracebacks() == 0, log[-6000:]
    assert "never retrieved" not in log
    lines = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    assert 1 <= len(lines) <= 8, lines
