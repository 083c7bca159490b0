"""A close Redis did not take is retried (presence_app.realtime.coalescer.Closes), on a real
socket, channel layer and Redis: the user goes offline with the grace once Redis is back, not
when their lease runs out, and their connection's registry field goes with it (the sweep leaves
a connected user's field to the disconnect).

Redis refuses the close for real: writes are paused (``CLIENT PAUSE WRITE``), and the store's
connection waiting in the pause is killed by Redis (``CLIENT KILL``), so the disconnect never
ran there and its caller got a connection error, as from a Redis that went away mid-call."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers

from presence_app import presence
from presence_app.core.connection import get_async_store
from presence_app.store.keys import KeySpace, registry_bucket

from ..timing import limit
from ..ws import FAST, Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

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
    redis_client.execute_command("CLIENT", "PAUSE", 10_000, "WRITE")
    try:
        closing = asyncio.ensure_future(sock.close())
        waiting: list[str] = []
        for _ in range(200):  # the close's disconnect reaches the pause
            waiting = waiting_scripts(redis_client)
            if waiting:
                break
            await asyncio.sleep(0.02)
        assert waiting, "the close's disconnect never reached Redis"
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
