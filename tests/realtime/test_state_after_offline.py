"""A room state that reached a process just before its user went offline (invisible) never
reaches a socket after that offline, over real sockets, the real channels-redis layer and a
real Redis.

A room's feed buffers room states to one frame a slot (``roomstate.Outbox``): a state taken by
the store while its user was visible may wait there for its slot while the user's leave and
update arrive and go out (at once to a socket that takes an event a frame; first, as the tick's
``presence.diff``, to one that batches). Sent after them, it told the viewer the user it had
just been told is offline is still in the room: the invisible user's presence leaked (found by
tests/access/test_visibility_model.py: "a room state of a user not known online in the room").
The feed drops states of users it knows offline when their frame goes out, not only when they
arrive.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import channel_layers

from presence_app import presence
from presence_app.core import dispatch
from presence_app.realtime import roomstate

from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

ROOM = "doc"


@pytest.fixture
async def slow_states(redis_client):
    """Two-second room-state slots: a state buffered for the next slot waits long enough for
    the offline to overtake it on any machine."""
    channel_layers.backends.clear()
    with presence_settings(ROOM_STATE_RATE=0.5, MEMBERSHIP_RATE=4):
        yield roomstate.tick()
        await shutdown()
    channel_layers.backends.clear()


async def open_in(cookie: str, name: str, *, diffs: bool = False) -> Socket:
    sock = await Socket.open(cookie, name=name)
    sock.beat()
    if diffs:
        await sock.send(type="hello", accept=["presence.diff"])
    await sock.send(type="join", room=ROOM)
    await sock.wait_for("presence.state", room=ROOM)
    return sock


def says_offline(frame: dict, user: str) -> bool:
    if frame["type"] == "presence.diff":
        return any(
            m["user"] == user and m["state"] == "offline"
            for key in ("left", "updated")
            for m in frame.get(key, [])
        )
    return (
        frame["type"] in ("presence.leave", "presence.update")
        and frame.get("user") == user
        and frame.get("state") == "offline"
    )


def late_state(frame: dict, user: str) -> bool:
    return frame["type"] == "presence.roomstate" and any(
        st["user"] == user and st["data"] is not None for st in frame["states"]
    )


async def test_a_state_buffered_before_an_offline_never_follows_it(slow_states):
    tick = slow_states
    (_, alice), (bob_user, bob), (_, carol) = [
        await make_user(name) for name in ("alice", "bob", "carol")
    ]
    each = await open_in(alice, "each")  # an event a frame
    batched = await open_in(alice, "batched", diffs=True)  # a presence.diff a tick
    b = await open_in(bob, "bob")
    c = await open_in(carol, "carol")
    uid, marker_user = b.user, c.user
    for sock in (each, batched):
        sock.drain()
    # What Bob's far process flushed while he was visible (the store took it): the first goes
    # out in its slot, the second waits in the feed's outbox for the next one, ...
    for n in (1, 2):
        await dispatch.aroom_states(ROOM, [{"user": uid, "conn": "far", "data": {"n": n}}])
    # ... while Bob goes invisible: his leave and update reach the room at once.
    await presence.aset_status(bob_user, "invisible")
    await b.wait_for("presence.update", state="invisible")
    # A marker after the buffered state's slot: whatever the feed held comes before it.
    await asyncio.sleep(tick * 1.5)
    await dispatch.aroom_states(ROOM, [{"user": marker_user, "conn": "m", "data": {"m": 1}}])
    for sock in (each, batched):
        frames = []
        while not any(late_state(f, marker_user) for f in frames):
            frames.append(await sock.next(20))
        told = next((i for i, f in enumerate(frames) if says_offline(f, uid)), None)
        assert told is not None, (sock.name, "never told Bob is offline", frames)
        after = [f for f in frames[told:] if late_state(f, uid)]
        assert after == [], (sock.name, "Bob's state after his offline", frames)
