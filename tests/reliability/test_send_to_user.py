"""send_to_user across processes: alice has a WebSocket on one server process and an SSE stream
on another (two devices); a call from a third process (a task, a shell: ``manage.py shell -c``
on the same settings) reaches both, and bob, on both processes and in alice's room, gets
nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.sse_client import SseClient

from .clients import Client

pytestmark = pytest.mark.timeout(120)

SEND = """
import django, json, sys
django.setup()
from presence_app import presence
presence.send_to_user(sys.argv[1], json.loads(sys.argv[2]))
"""


async def test_two_devices_on_two_processes(db, servers):
    users = db.users(["alice", "bob"])
    one = await servers.astart("p1")
    two = await servers.astart("p2", server="daphne")
    phone = await Client(one, users["alice"]).connect()
    laptop = await SseClient(two, users["alice"]).connect()
    bob_ws = await Client(one, users["bob"]).connect()
    bob_sse = await SseClient(two, users["bob"]).connect()
    # The sockets beat, as presence.js does: the shell below takes seconds to start on a loaded
    # machine, longer than the lease of a socket that never beats (closed as silent, 4408).
    phone.beat(), bob_ws.beat()
    await phone.join("team")
    await laptop.join("team")
    await bob_ws.join("team")
    await bob_sse.join("team")

    payload = {"kind": "mention", "by": "carol", "text": "see #42"}
    await asyncio.to_thread(db.run, ["-c", SEND, users["alice"].id, json.dumps(payload)])
    for device in (phone, laptop):
        got = await device.wait_for("presence.message", timeout=10)
        assert got == {"type": "presence.message", "payload": payload}
    for other in (bob_ws, bob_sse):
        assert [f for f in await other.collect(1.5) if f["type"] == "presence.message"] == []
    for c in (phone, laptop, bob_ws, bob_sse):
        await c.close()
    assert one.tracebacks() == 0 and two.tracebacks() == 0
