"""On the socket: the AUDIENCE policy on snapshots and events, one update per change however
many groups bring it, and a big room's snapshot in pages — real sockets (in process), the real
channels-redis pub/sub layer, the real Redis."""

from __future__ import annotations

import pytest
from channels.layers import channel_layers

from presence_app import presence

from ..access import test_audience as model
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def users(redis_client):
    channel_layers.backends.clear()
    model.RELATION.clear()
    with presence_settings(AUDIENCE="tests.access.test_audience.apolicy", ROOM_SNAPSHOT_PAGE=3):
        yield [await make_user(name) for name in ("ann", "bob", "cat")]
        await shutdown()
    channel_layers.backends.clear()
    model.RELATION.clear()


async def opened(*pairs) -> list[Socket]:
    socks = [await Socket.open(cookie, name=user.username) for user, cookie in pairs]
    for sock in socks:
        sock.beat()
    return socks


async def test_a_socket_sees_only_its_audience(users):
    ann, bob, cat = users
    a, b, c = await opened(ann, bob, cat)
    model.RELATION[a.user] = {b.user}  # ann sees bob, not cat; bob and cat see nobody
    for sock in (b, c):
        await sock.send(type="join", room="lobby")
        await sock.wait_for("presence.state", room="lobby")
    await presence.aset_status(c.user, "dnd", message="secret")

    await a.send(type="watch", users=[b.user, c.user])
    state = await a.wait_for("presence.state", watch=True)
    seen = {m["user"]: m for m in state["members"]}
    assert seen[b.user]["state"] == "online"
    assert seen[c.user] == {
        "user": c.user,
        "state": "offline",
        "last_seen": None,
        "last_active": None,
        "message": "",
        "emoji": "",
        "device": "",
        "last_seen_approx": "",
    }
    await a.send(type="join", room="lobby")
    state = await a.wait_for("presence.state", room="lobby")
    assert [m["user"] for m in state["members"]] == [b.user, a.user]

    # Events: cat's status, typing and leave never reach ann; bob's do.
    await c.send(type="status", message="still secret")
    await c.send(type="typing", room="lobby")
    await c.send(type="leave", room="lobby")
    await b.send(type="status", message="hello")
    await a.wait_for("presence.update", user=b.user, message="hello")
    frames = await a.collect(1.0)
    assert [f for f in frames if f.get("user") == c.user] == []
    # bob, outside cat's audience, did not hear of ann's join either (nobody is in his)
    assert [f for f in b.drain() if f.get("user") == a.user] == []
    for sock in (a, b, c):
        await sock.close()


async def test_an_update_reaches_a_socket_once_however_many_groups_bring_it(users):
    ann, bob, _ = users
    a, b = await opened(ann, bob)
    model.RELATION[a.user] = {b.user}
    for room in ("lobby", "kitchen"):
        for sock in (a, b):
            await sock.send(type="join", room=room)
            await sock.wait_for("presence.state", room=room)
    await a.send(type="watch", users=[b.user])
    await a.wait_for("presence.state", watch=True)

    await b.send(type="status", state="dnd", message="busy")
    first = await a.wait_for("presence.update", user=b.user, state="dnd")
    # The change was sent to three groups ann's socket is in (bob's watchers, two rooms)...
    again = [
        f
        for f in await a.collect(1.5)
        if f["type"] == "presence.update" and f.get("user") == b.user
    ]
    assert again == []  # ...and reached the browser once
    await b.send(type="status", state="online")  # the next change is a new update
    second = await a.wait_for("presence.update", user=b.user, state="online")
    assert second["at"] >= first["at"]
    for sock in (a, b):
        await sock.close()


async def test_a_big_room_snapshot_comes_in_pages(users):
    ann, _, _ = users
    names = [f"m{i}" for i in range(7)]
    for name in names:
        await presence.aconnect(f"{name}-c", name)
        await presence.ajoin("big", f"{name}-c", name)
    (a,) = await opened(ann)
    model.RELATION[a.user] = set(names) - {"m4"}
    await a.send(type="join", room="big")
    pages = [await a.wait_for("presence.state", room="big", page=n) for n in range(3)]
    assert [p["more"] for p in pages] == [True, True, False]
    assert all(len(p["members"]) <= 3 for p in pages)
    listed = [m["user"] for p in pages for m in p["members"]]
    assert listed == [n for n in names if n != "m4"] + [a.user]  # in the order they came
    await a.close()


async def test_a_change_is_one_publish_per_group_however_many_watch(users):
    """The bound: a status change costs one PUBLISH for the watchers' group (and one for the
    user's own sockets), not one per watcher; each process hands it to its own sockets."""
    from ..ws import Monitor

    ann, bob, _ = users
    (b,) = await opened(bob)
    watchers = [await Socket.open(ann[1], name=f"ann-{i}") for i in range(30)]
    model.RELATION[watchers[0].user] = {b.user}
    for sock in watchers:
        await sock.send(type="watch", users=[b.user])
        await sock.wait_for("presence.state", watch=True)
    async with Monitor() as monitor:
        await presence.aset_status(b.user, "dnd")
        for sock in watchers:
            await sock.wait_for("presence.update", user=b.user, state="dnd")
    publishes = [c for c in monitor.commands if c and c[0].upper() == "PUBLISH"]
    assert len(publishes) == 2, publishes  # bob's watchers, bob's own sockets
    for sock in [b, *watchers]:
        await sock.close()
