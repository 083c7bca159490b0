"""A close or a leave Redis did not take is retried (presence_app.realtime.coalescer.Retries),
on real sockets, a real channel layer and Redis: the user goes offline with the grace once Redis
is back, not when their lease runs out, and their connection's registry field goes with it (the
sweep leaves a connected user's field to the disconnect); a room hears of a refused leave once
Redis is back, and of one Redis did although its call failed.

Redis refuses the close for real: writes are paused (``CLIENT PAUSE WRITE``), and the store's
connection waiting in the pause is killed by Redis (``CLIENT KILL``), so the disconnect never
ran there and its caller got a connection error, as from a Redis that went away mid-call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers

from presence_app import presence
from presence_app.core import tenants
from presence_app.core.connection import get_async_store
from presence_app.realtime.coalescer import get_retries, leave_later
from presence_app.store.keys import KeySpace, registry_bucket

from ..timing import limit
from ..ws import FAST, Socket, make_user, presence_settings, shutdown

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

LEASE = 120  # no lease runs out within the test: only the retried close ends the user


@pytest.fixture
async def long_lease(redis_client):
    channel_layers.backends.clear()
    with presence_settings(LEASE_TTL=LEASE, HEARTBEAT_INTERVAL=30):
        try:
            yield
        finally:
            await shutdown()


def field(redis_client, user_id: str) -> bytes | None:
    store = get_async_store()
    tag = store.keys.tag_for_user(user_id)
    bucket = KeySpace.registry(tag, registry_bucket(user_id, store.config.registry_buckets))
    return redis_client.hget(bucket, user_id)


def waiting_scripts(redis_client) -> list[str]:
    """The ids of Redis' clients whose script call waits in the pause."""
    return [
        str(c["id"])
        for c in redis_client.client_list()
        if c.get("cmd") in ("evalsha", "eval") and "b" in c.get("flags", "")
    ]


async def refused_close(redis_client, sock: Socket) -> None:
    """Closes ``sock`` while Redis refuses its disconnect (see the module's docstring)."""
    await refused(redis_client, sock.close())


async def refused(redis_client, action: Any) -> None:
    """Runs ``action`` while Redis refuses the script call it makes."""
    redis_client.execute_command("CLIENT", "PAUSE", 10_000, "WRITE")
    try:
        closing = asyncio.ensure_future(action)
        waiting: list[str] = []
        for _ in range(200):  # the close's disconnect reaches the pause
            waiting = waiting_scripts(redis_client)
            if waiting:
                break
            await asyncio.sleep(0.02)
        assert waiting, "the call never reached Redis"
        for client_id in waiting:
            redis_client.execute_command("CLIENT", "KILL", "ID", client_id)
    finally:
        redis_client.execute_command("CLIENT", "UNPAUSE")
    await closing


async def test_a_close_redis_did_not_take_is_retried(long_lease, redis_client):
    _, cookie = await make_user("ann")
    sock = await Socket.open(cookie)
    user = sock.user
    assert (await presence.aget(user)).state == "online"
    assert field(redis_client, user) is not None

    await refused_close(redis_client, sock)

    # Without the retry the user stays online for the whole lease (LEASE s); with it, the
    # close is taken a second later and the grace and a sweep end them.
    deadline = asyncio.get_running_loop().time() + limit(
        1 + FAST["DISCONNECT_GRACE"] + FAST["SWEEP_INTERVAL"]
    )
    while (await presence.aget(user)).state != "offline":
        assert asyncio.get_running_loop().time() < deadline, "the close was not retried"
        await asyncio.sleep(0.1)
    assert field(redis_client, user) is None


async def test_a_refused_close_beside_another_device_does_not_stay_for_good(
    long_lease, redis_client
):
    """The user's other device keeps them online and renews their sign of life, and the store
    holds a connection while its process's lease runs: a close Redis never took would stay in
    the store as long as the process lives, not only for a lease (a sign-out's closed tab
    still listed beside the phone)."""
    _, cookie = await make_user("ann")
    phone = await Socket.open(cookie, name="phone")
    phone.beat(0.5)
    laptop = await Socket.open(cookie, name="laptop")
    user = phone.user

    def connections(export: dict) -> list[str]:
        return [c for space in export["workspaces"].values() for c in space["connections"]]

    assert len(connections(await sync_to_async(presence.export)(user))) == 2
    await refused_close(redis_client, laptop)

    deadline = asyncio.get_running_loop().time() + limit(
        1 + FAST["DISCONNECT_GRACE"] + FAST["SWEEP_INTERVAL"]
    )
    while len(connections(await sync_to_async(presence.export)(user))) != 1:
        assert asyncio.get_running_loop().time() < deadline, "the laptop's close stayed"
        await asyncio.sleep(0.1)
    assert (await presence.aget(user)).state == "online"  # the phone's
    await phone.close()


async def joined(sock: Socket, room: str) -> None:
    await sock.send(type="join", room=room)
    await sock.wait_for("presence.state", room=room)


async def test_a_refused_leave_is_retried_and_told(long_lease, redis_client):
    """Before, the connection stayed in the room (the session put it back and answered an
    error, which presence.js does not retry for a leave): a member the others saw for good."""
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    a, b = await Socket.open(ann, name="ann"), await Socket.open(bob, name="bob")
    await joined(a, "kitchen")
    await joined(b, "kitchen")
    await refused(redis_client, a.send(type="leave", room="kitchen"))
    event = await b.wait_for(
        "presence.leave",
        user=a.user,
        timeout=limit(1 + FAST["HEARTBEAT_FLUSH_INTERVAL"]) + 5,
    )
    assert event["room"] == "kitchen" and event["state"] == "online"
    assert await presence.aroom_members("kitchen", viewer=presence.TRUSTED) == [b.user]
    await a.close()
    await b.close()


async def retries_done() -> None:
    """Waits until the process's retries are through (nothing pending, their task ended), then
    a moment for what they sent to arrive: a window in which nothing more may come."""
    retries = get_retries()
    deadline = asyncio.get_running_loop().time() + limit(3)
    while retries.pending or (retries.task is not None and not retries.task.done()):
        assert asyncio.get_running_loop().time() < deadline, "the retries never ended"
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)


async def test_a_refused_leave_is_not_retried_once_joined_again(long_lease, redis_client):
    """The client joins the room again before the retry's round: the retry leaves the room
    alone (the connection is in it, for the others too)."""
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    a, b = await Socket.open(ann, name="ann"), await Socket.open(bob, name="bob")
    await joined(a, "kitchen")
    await joined(b, "kitchen")
    await refused(redis_client, a.send(type="leave", room="kitchen"))
    await joined(a, "kitchen")
    assert get_retries().pending  # the refused leave waits for its round
    await retries_done()
    members = await presence.aroom_members("kitchen", viewer=presence.TRUSTED)
    assert sorted(members) == sorted([a.user, b.user])
    assert [f for f in b.drain() if f.get("type") == "presence.leave"] == []
    await a.close()
    await b.close()


@dataclass
class Left:
    """A connection out of its rooms (what ``leave_later`` reads of a session)."""

    conn_id: str
    user_id: str
    tenant: str | None = None
    rooms: frozenset[str] = frozenset()


async def test_a_leave_redis_did_unanswered_is_told_once(long_lease, redis_client):
    """Redis took the leave but its answer was lost (the call timed out): the retry finds
    nothing to do, and tells the room itself; the user's other connection in the room keeps
    them there, and then nothing is told."""
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    phone, laptop = await Socket.open(ann, name="phone"), await Socket.open(ann, name="laptop")
    b = await Socket.open(bob, name="bob")
    for sock in (phone, laptop, b):
        await joined(sock, "kitchen")
    user = phone.user
    store = get_async_store()
    conns = await sync_to_async(presence.export)(user)
    phone_conn, laptop_conn = [c for s in conns["workspaces"].values() for c in s["connections"]]

    # The laptop's leave done unanswered: the phone is still in the room, nothing to tell.
    await store.leave("kitchen", laptop_conn, user)
    leave_later("kitchen", Left(laptop_conn, user))
    # The phone's too: now the room must hear it, once.
    await store.leave("kitchen", phone_conn, user)
    leave_later("kitchen", Left(phone_conn, user))
    event = await b.wait_for("presence.leave", user=user, timeout=limit(1) + 5)
    assert event["room"] == "kitchen"
    await retries_done()  # the other retry's round: no second leave
    assert [f for f in b.drain() if f.get("type") == "presence.leave"] == []
    for sock in (phone, laptop, b):
        await sock.close()


def workspace(source: Any) -> str | None:
    """The workspace a socket names with ``?ws=`` (the TENANT hook)."""
    if isinstance(source, dict):
        return parse_qs(source.get("query_string", b"").decode()).get("ws", [None])[0]
    return source.GET.get("ws")


async def test_a_refused_leave_is_retried_in_its_workspace(redis_client):
    """The retry writes and tells in the workspace of the connection that left: the same room
    in another workspace neither loses its member nor hears of the leave."""
    channel_layers.backends.clear()
    hook = "tests.realtime.test_close_retried.workspace"
    with presence_settings(LEASE_TTL=LEASE, HEARTBEAT_INTERVAL=30, TENANT=hook):
        try:
            (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
            a = await Socket.open(ann, name="ann@w1", path="/ws/presence/?ws=w1")
            b = await Socket.open(bob, name="bob@w1", path="/ws/presence/?ws=w1")
            a2 = await Socket.open(ann, name="ann@w2", path="/ws/presence/?ws=w2")
            c = await Socket.open(bob, name="bob@w2", path="/ws/presence/?ws=w2")
            for sock in (a, b, a2, c):
                await joined(sock, "kitchen")
            await refused(redis_client, a.send(type="leave", room="kitchen"))
            event = await b.wait_for("presence.leave", user=a.user, timeout=limit(1) + 5)
            assert event["room"] == "kitchen"
            with tenants.activate("w1"):
                assert await presence.aroom_members("kitchen", viewer=presence.TRUSTED) == [b.user]
            with tenants.activate("w2"):
                members = await presence.aroom_members("kitchen", viewer=presence.TRUSTED)
                assert sorted(members) == sorted([a.user, c.user])
            assert [f for f in c.drain() if f.get("type") == "presence.leave"] == []
            for sock in (a, b, a2, c):
                await sock.close()
        finally:
            await shutdown()


async def test_an_invisible_users_leave_done_unanswered_is_told_to_nobody(long_lease, redis_client):
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    a, b = await Socket.open(ann, name="ann"), await Socket.open(bob, name="bob")
    await a.send(type="status", state="invisible")
    await a.wait_for("presence.update", self=True, state="invisible")
    for sock in (a, b):
        await joined(sock, "kitchen")
    (conn,) = [
        c
        for s in (await sync_to_async(presence.export)(a.user))["workspaces"].values()
        for c in s["connections"]
    ]
    await get_async_store().leave("kitchen", conn, a.user)
    leave_later("kitchen", Left(conn, a.user))
    await retries_done()
    assert [f for f in b.drain() if f.get("user") == a.user] == []
    await a.close()
    await b.close()
