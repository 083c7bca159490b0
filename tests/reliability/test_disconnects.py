"""A browser that drops its connection while the server is still answering its frames is
cleaned up as one that closed cleanly: its lease is cut to the grace and its channel-layer
groups are left at once. (Before the fix, uvicorn's ClientDisconnected ended the consumer at
the first reply it could not send, skipping disconnect(): the user stayed a full LEASE_TTL, and
the socket's dead channel stayed in its groups for channels-redis' group_expiry, a day.)"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.timing import apart, limit, said

from .clients import Client
from .conftest import eventually
from .settings import TIMERS

pytestmark = pytest.mark.timeout(60)

ROOMS = [f"room-{i}" for i in range(15)]
#: The promise: a dropped socket is gone a grace and a sweep after the drop ...
PROMISE = TIMERS["DISCONNECT_GRACE"] + TIMERS["SWEEP_INTERVAL"]
#: ... not a lease after it (what a skipped disconnect() costs): the lease is made long enough
#: that even the slack of a loaded machine (tests/timing.py) cannot mistake one for the other.
LEASE_TTL = max(TIMERS["LEASE_TTL"], 2 * limit(PROMISE))


@pytest.mark.parametrize("layer", ["pubsub", "core"])
async def test_dropped_mid_conversation_is_cleaned_up_like_a_close(db, servers, store, layer):
    users = db.users([f"dropper{i}" for i in range(5)])
    apart(PROMISE, LEASE_TTL)
    server = await servers.astart(
        env={
            "RELIABILITY_LAYER": layer,
            "PRESENCE_OVERRIDES": json.dumps({"LEASE_TTL": LEASE_TTL}),
        }
    )
    droppers = []
    for user in users.values():
        client = await Client(server, user).connect()
        await client.join("lobby")
        droppers.append(client)
    ids = {c.id for c in droppers}
    await eventually(lambda: set(store.online()) == ids, 30, "all online")
    # RedisChannelLayer keeps its groups in Redis (the pub/sub layer in the process).
    layer_keys = f"asgi-{store.config.prefix}:group:*"
    assert bool(store.client.keys(layer_keys)) == (layer == "core")

    loop = asyncio.get_running_loop()
    # Each sends a burst of frames that all want an answer, and vanishes before reading one.
    for client in droppers:
        for room in ROOMS:
            await client.send(type="join", room=room)
    gone_at = loop.time()
    await asyncio.gather(*(c.abort() for c in droppers))

    # Gone after the grace (and a sweep), not after the lease: disconnect() ran for each.
    await eventually(lambda: not set(store.online()) & ids, LEASE_TTL, "offline")
    took = loop.time() - gone_at
    print(said("offline", took, PROMISE), f"after the drop (lease {LEASE_TTL:g} s)")
    assert took <= limit(PROMISE)
    # ... and left every group: no dead channel is kept in the channel layer.
    assert store.client.keys(layer_keys) == []
    assert server.tracebacks() == 0, server.log()
