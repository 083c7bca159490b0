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


async def test_a_slow_join_does_not_cost_the_socket_the_servers_keepalive(db, servers):
    """uvicorn pings every second and closes a socket whose pong is not read within a second
    (1011); it reads a socket only while the application takes what it read. The join is
    handled for 5 s, and the socket goes on being read meanwhile (presence_app.realtime.
    inbox): the pongs are read, the join is answered, the heartbeats sent behind it too."""
    users = db.users(["ann"])
    hook = {"CAN_JOIN": "tests.reliability.hooks.slow_can_join"}
    server = await servers.astart(
        env={"PRESENCE_OVERRIDES": json.dumps(hook)},
        args=["--ws-ping-interval", "1", "--ws-ping-timeout", "1"],
    )
    ann = await Client(server, users["ann"]).connect()
    ann.beat(0.5)
    state = await ann.join("slow-5000", timeout=limit(60))
    assert state["room"] == "slow-5000" and ann.open
    await ann.join("lobby", timeout=limit(30))  # and the socket is served on
    assert ann.open and ann.close_code is None
    await ann.close()
