"""Access is re-checked (finding 5 of the review of 89165fe): a resumed SSE stream is let back
only into the rooms ``CAN_JOIN`` still admits it to, and ``presence.revoke`` or an ended
permanent membership takes a user's live connections (sockets and streams) out of a room at
once, each with a leave to the room. On 89165fe a resume kept the refused room in Redis, and no
live connection was ever re-checked."""

from __future__ import annotations

import asyncio

import pytest

from tests.sse_client import SseClient

from .clients import Client
from .conftest import eventually
from .settings import TIMERS

pytestmark = pytest.mark.timeout(120)

#: The promise: out within one heartbeat interval (a revocation travels on the channel layer).
#: The slack, for a loaded 2-core machine: 5 times the promised bound.
WITHIN = 5 * TIMERS["HEARTBEAT_INTERVAL"]


async def python(db, code: str) -> None:
    """Runs ``code`` in a process of the site's own (its settings, Redis, channel layer), in a
    thread: the event loop runs on meanwhile, and with it the clients' heartbeats (blocked for
    the seconds a loaded machine takes to start Django, the watcher was closed as silent)."""
    await asyncio.to_thread(db.run, ["-c", f"import django; django.setup()\n{code}"])


async def test_a_resumed_stream_is_let_back_only_where_can_join_admits_it(db, servers, store):
    # tests/reliability/hooks.py: staff-* rooms admit staff only.
    users = db.users(["alice", "bob"], is_staff=True)
    server = await servers.astart()
    watcher = await Client(server, users["alice"]).connect()
    watcher.beat(0.5)
    await watcher.join("staff-doc")
    sse = await SseClient(server, users["bob"]).connect()
    await sse.join("staff-doc")
    await watcher.wait_for("presence.join", room="staff-doc", user=users["bob"].id)

    await python(
        db,
        "from django.contrib.auth import get_user_model\n"
        "get_user_model().objects.filter(username='bob').update(is_staff=False)",
    )
    await sse.close()
    await sse.connect(resume=True)  # within the grace, with its Last-Event-ID
    refused = await sse.wait_for("error", timeout=10, room="staff-doc")
    assert refused["code"] == "forbidden"
    await watcher.wait_for("presence.leave", timeout=10, room="staff-doc", user=users["bob"].id)
    assert store.room_members("staff-doc") == [users["alice"].id]
    await sse.close()
    await watcher.close()
    assert server.tracebacks() == 0, server.log()


@pytest.mark.parametrize("how", ["revoke", "membership"])
async def test_revoking_takes_every_live_connection_out_of_the_room(db, servers, store, how):
    users = db.users(["alice", "bob"])
    server = await servers.astart()
    watcher = await Client(server, users["alice"]).connect()
    watcher.beat(0.5)
    await watcher.join("lobby")
    sock = await Client(server, users["bob"]).connect()
    sock.beat(0.5)
    sse = await SseClient(server, users["bob"]).connect()
    if how == "membership":
        await sock.send(type="join", room="lobby", permanent=True)
        await sock.wait_for("presence.state", room="lobby")
        await sse.wait_for("presence.state", timeout=10, room="lobby")  # joined unasked
    else:
        await sock.join("lobby")
        await sse.join("lobby")
    await watcher.wait_for("presence.join", room="lobby", user=users["bob"].id)

    bob = users["bob"].id
    if how == "revoke":
        await python(db, f"from presence_app import presence\npresence.revoke({bob!r}, 'lobby')")
    else:
        await python(
            db, f"from presence_app import rooms\nassert rooms.remove_member({bob!r}, 'lobby')"
        )
    for client in (sock, sse):
        error = await client.wait_for("error", timeout=WITHIN, room="lobby")
        assert error["code"] == "forbidden"
    await watcher.wait_for("presence.leave", timeout=WITHIN, room="lobby", user=bob)
    await eventually(lambda: store.room_members("lobby") == [users["alice"].id], WITHIN, "out")
    # Still online, still connected: only the room was taken away.
    assert bob in store.online()
    for client in (sock, sse, watcher):
        await client.close()
    assert server.tracebacks() == 0, server.log()
