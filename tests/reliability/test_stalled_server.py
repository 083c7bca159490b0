"""Silence is counted in the server's own time (presence_app.realtime.liveness): a server
process descheduled for longer than the lease (SIGSTOP here; a loaded machine or a long pause of
the collector does the same) does not close the sockets whose heartbeats waited in its socket
buffers, and a heartbeat queued behind a slow frame of its own socket is not silence either. A
socket that really stops beating is still closed as silent (4408)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from presence_app.consumers import CLOSE_SILENT
from tests.frame_waits import CLOSED
from tests.timing import limit

from .clients import Client
from .settings import TIMERS

pytestmark = pytest.mark.timeout(120)

LEASE = TIMERS["LEASE_TTL"]


async def test_a_stopped_server_closes_none_of_the_sockets_that_kept_beating(db, servers):
    users = db.users(["ann", "bob"])
    server = await servers.astart()
    beating = await Client(server, users["ann"], name="beating").connect()
    silent = await Client(server, users["bob"], name="silent").connect()
    beating.beat(0.5)
    await beating.join("lobby")
    # Stopped for a lease and a half: ann beat all along, into the server's socket buffer.
    os.kill(server.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(1.5 * LEASE)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    # Her socket is served on: a join answered, no close.
    await beating.join("attic", timeout=limit(LEASE))
    assert beating.open
    # Bob never beat: closed as silent, the time the server lost given back once at most.
    closed = await silent.wait_for(CLOSED, timeout=limit(3 * LEASE))
    assert closed["code"] == CLOSE_SILENT
    await beating.close()


async def test_a_heartbeat_behind_a_slow_join_is_not_silence(db, servers):
    users = db.users(["ann"])
    # CAN_JOIN takes a lease and a half to answer for this room.
    hook = {"CAN_JOIN": "tests.reliability.hooks.slow_can_join"}
    room = f"slow-{int(1500 * LEASE)}"
    server = await servers.astart(env={"PRESENCE_OVERRIDES": json.dumps(hook)})
    ann = await Client(server, users["ann"]).connect()
    ann.beat(0.5)
    state = await ann.join(room, timeout=limit(3 * LEASE))
    assert state["room"] == room and ann.open
    await ann.close()
