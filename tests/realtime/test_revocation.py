"""Revocation is final (issue 41): after its ``forbidden`` a connection receives nothing more
of the room, events already queued for it included; and a permanent leave revokes in the
workspace of the socket that made it, so the user's other sockets there leave too. Real
sockets, the real channels-redis layer, a real Redis."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

import pytest
from channels.layers import channel_layers

from presence_app import presence, tenants

from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

#: A join of the room "held" waits here until the test lets it go: the socket handles nothing
#: else meanwhile, so the channel-layer events sent meanwhile queue up for it, in order.
GATE: dict[str, asyncio.Event] = {}


async def held(user, room):
    if room == "held":
        GATE["entered"].set()
        await GATE["release"].wait()
    return True


def workspace(source):
    """The workspace a socket names with ``?ws=`` (the TENANT hook)."""
    if isinstance(source, dict):
        return parse_qs(source.get("query_string", b"").decode()).get("ws", [None])[0]
    return source.GET.get("ws")


@pytest.fixture
async def fast(redis_client):
    channel_layers.backends.clear()
    GATE.update(entered=asyncio.Event(), release=asyncio.Event())
    with presence_settings(
        CAN_JOIN="tests.realtime.test_revocation.held",
        TENANT="tests.realtime.test_revocation.workspace",
        PERMANENT_ROOMS=True,
    ):
        yield
        await shutdown()
    channel_layers.backends.clear()
    GATE.clear()


async def test_after_forbidden_nothing_more_of_the_room_arrives(fast):
    (_, ann), (bob, bob_cookie), (_, cat) = [await make_user(n) for n in ("ann", "bob", "cat")]
    a = await Socket.open(ann, name="ann")
    b = await Socket.open(bob_cookie, name="bob")
    c = await Socket.open(cat, name="cat")
    for sock in (a, b, c):
        sock.beat()
    for sock in (a, b):
        await sock.send(type="join", room="lobby")
        await sock.wait_for("presence.state", room="lobby")

    # Bob's socket is busy (its join of "held" waits on CAN_JOIN) while, in this order, his
    # access to the lobby is revoked and the lobby gets a join and a typing; then a message
    # for him alone marks the end of what was queued.
    await b.send(type="join", room="held")
    await asyncio.wait_for(GATE["entered"].wait(), 10)
    await presence.arevoke(bob, "lobby")
    await c.send(type="join", room="lobby")
    await c.wait_for("presence.state", room="lobby")  # its join event went out before this
    await c.send(type="typing", room="lobby")
    await c.send(type="roomstate", room="lobby", data={"cursor": 1})
    await a.wait_all(
        ("presence.typing", {"user": c.user}), ("presence.roomstate", {"room": "lobby"})
    )  # sent to the lobby's group: bob's socket holds them too
    await presence.asend_to_user(bob, {"marker": True})
    GATE["release"].set()

    frames = []
    while not (frames and frames[-1]["type"] == "presence.message"):
        frames.append(await b.next(10))
    # (Events of the lobby queued before the revoke come before it.)
    forbidden = [i for i, f in enumerate(frames) if f.get("code") == "forbidden"]
    assert len(forbidden) == 1 and frames[forbidden[0]]["room"] == "lobby", frames
    after = frames[forbidden[0] + 1 :]
    assert [f for f in after if f.get("room") == "lobby"] == [], after
    assert [f for f in after if f.get("user") == c.user] == [], after  # nothing of cat's
    assert sorted(await presence.aroom_members("lobby")) == sorted([a.user, c.user])
    for sock in (a, b, c):
        await sock.close()


async def test_a_permanent_leave_revokes_in_the_workspace_of_its_socket(fast):
    _, ann = await make_user("ann")
    one = await Socket.open(ann, path="/ws/presence/?ws=acme", name="ann-1")
    two = await Socket.open(ann, path="/ws/presence/?ws=acme", name="ann-2")
    for sock in (one, two):
        sock.beat()
    await one.send(type="join", room="team", permanent=True)
    await one.wait_for("presence.state", room="team")
    await two.wait_for("presence.state", room="team")  # a member now: it joined unasked

    await one.send(type="leave", room="team", permanent=True)
    refused = await two.wait_for("error", timeout=10, room="team")  # out of it too
    assert refused["code"] == "forbidden"
    with tenants.activate("acme"):
        assert await presence.aroom_members("team") == []
    for sock in (one, two):
        await sock.close()
