"""A project's own consumer carrying presence (PresenceConsumerMixin), on a real uvicorn: the
demo's chat socket (ws/chat/) does everything the presence socket does — hello, heartbeats
through the coalescer, rooms, grace, sweep, events — beside its own chat frames, and the two
kinds of socket see each other in a room."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.timing import limit, said

from ..users import login_name
from .clients import Client
from .conftest import eventually
from .settings import TIMERS

pytestmark = pytest.mark.timeout(90)

#: A grace long enough that a reload (a close, a handshake, a join) falls within it however
#: loaded the machine: the reliability servers' 1 s is tight for that under a CPU hog.
GRACE = 3.0
LEASE_TTL = 2 * GRACE


def chat_client(server, user, name=""):
    client = Client(server, user, name=name)
    client.url = server.ws_url.replace("/ws/presence/", "/ws/chat/")
    return client


async def test_a_chat_socket_carries_presence(db, servers, store):
    users = db.users(["ann", "ben", "cy"])
    server = await servers.astart(
        env={"PRESENCE_OVERRIDES": json.dumps({"DISCONNECT_GRACE": GRACE, "LEASE_TTL": LEASE_TTL})}
    )
    loop = asyncio.get_running_loop()
    ann = await chat_client(server, users["ann"]).connect()
    ben = await chat_client(server, users["ben"]).connect()
    cy = await Client(server, users["cy"]).connect()  # the plain presence socket
    assert ann.hello["user"] == users["ann"].id and "heartbeat" in ann.hello

    # Heartbeats are acknowledged and renew the lease through the process' coalescer.
    await ann.send(type="heartbeat")
    await ann.wait_for("heartbeat.ack")
    ann.beat(0.5)
    ben.beat(0.5)
    cy.beat(0.5)

    # Rooms: both kinds of socket see each other come in.
    await cy.join("lobby")
    snapshot = await ann.join("lobby")
    assert {m["user"] for m in snapshot["members"]} == {users["ann"].id, users["cy"].id}
    await cy.wait_for("presence.join", room="lobby", user=users["ann"].id)
    await ben.join("lobby")
    await ann.wait_for("presence.join", room="lobby", user=users["ben"].id)

    # The chat's own frames beside presence's: to the room's chat sockets; the presence socket
    # in the same room has no handler for them and carries on.
    await ann.send(type="chat.message", room="lobby", text="hello")
    message = await ben.wait_for("chat.message")
    assert (message["user"], message["text"], message["name"]) == (
        users["ann"].id,
        "hello",
        login_name("ann"),
    )
    await ann.send(type="chat.message", room="elsewhere", text="hi")
    assert (await ann.wait_for("error", frame="chat.message"))["code"] == "not_joined"
    await ann.send(type="join", room="closed-1")  # the reliability servers' CAN_JOIN
    assert (await ann.wait_for("error", frame="join"))["code"] == "forbidden"

    # Status: an update to the room, the truth to the user's own socket.
    await ann.send(type="status", state="dnd", message="busy")
    await cy.wait_for("presence.update", user=users["ann"].id, state="dnd")
    assert (await ann.wait_for("presence.update", self=True))["state"] == "dnd"

    # Grace: a reload within DISCONNECT_GRACE is no leave and no join.
    closed_at = loop.time()
    await ben.close()
    ben = await chat_client(server, users["ben"]).connect()
    await ben.join("lobby")
    ben.beat(0.5)
    reloaded = loop.time() - closed_at
    assert reloaded < GRACE, f"the reload took {reloaded:.2f} s, past the grace: no test of it"
    # A window for a stray leave or join: past the old connection's grace and a sweep.
    await asyncio.sleep(GRACE - reloaded + TIMERS["SWEEP_INTERVAL"] + 0.5)
    seen = [
        f
        for f in cy.drain()
        if f.get("user") == users["ben"].id and f["type"] in ("presence.leave", "presence.join")
    ]
    assert seen == []

    # A dropped chat socket is cleaned up like any other: a leave to the room after the grace.
    promise = GRACE + TIMERS["SWEEP_INTERVAL"]
    dropped_at = loop.time()
    await ann.abort()
    await cy.wait_for("presence.leave", room="lobby", user=users["ann"].id, timeout=limit(promise))
    print(said("a dropped chat socket's leave", loop.time() - dropped_at, promise))
    await eventually(lambda: users["ann"].id not in store.online(), 30, "ann swept")
    assert store.room_members("lobby") and users["ann"].id not in store.room_members("lobby")

    await asyncio.gather(ben.close(), cy.close())
    assert server.tracebacks() == 0, server.log()
