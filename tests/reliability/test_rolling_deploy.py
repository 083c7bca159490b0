"""A rolling deploy behind one address: two uvicorn processes behind a TCP front (rolling.py, a
load balancer's part), 40 heartbeating WebSockets and 10 SSE streams spread over them, all in one
room. Process A gets SIGTERM and is started again, then process B. An observer on a third
process, in the room and watching everybody, must hear nothing: no leave, no join, no offline,
no duplicate.

- A process told to stop ends its connections at once: uvicorn closes its WebSockets (1012),
  and the app ends its SSE streams (presence_app/realtime/lifecycle.py), which uvicorn would otherwise
  wait for until its ``--timeout-graceful-shutdown`` (30 s here; by default, for ever). Each
  ended connection cuts its lease to the grace.
- The clients come back as presence.js does, through the front, to the live process: a socket
  connects again and re-joins; a stream reconnects after its ``retry:`` with its
  ``Last-Event-ID`` and resumes its connection and rooms. Back within ``DISCONNECT_GRACE``,
  nobody hears of it.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.sse_client import SseClient
from tests.timing import limit, said

from .clients import Client, close_all, connect_all
from .conftest import eventually
from .rolling import Front, Rollout
from .settings import TIMERS

pytestmark = pytest.mark.timeout(180)

SOCKETS, STREAMS = 40, 10
ROOM = "lobby"
#: uvicorn's --timeout-graceful-shutdown: what a stop would wait for open streams without the fix.
GRACEFUL = 30
#: A process told to stop is gone at once: a few round trips, not the graceful timeout.
STOPPED = 1.0
#: Long enough that every client is back within it even on a loaded machine (a stream waits
#: its retry: first, as a browser does).
GRACE = 8.0
OVERRIDES = {"DISCONNECT_GRACE": GRACE, "LEASE_TTL": 2 * GRACE}
RETRY = 2.0  # sse.RETRY_MS


async def test_a_rolling_restart_is_seen_by_nobody(db, servers, store):
    names = [f"ws{i}" for i in range(SOCKETS)] + [f"sse{i}" for i in range(STREAMS)]
    users = db.users([*names, "observer"])
    env = {"PRESENCE_OVERRIDES": json.dumps(OVERRIDES)}
    a, b, watch = await asyncio.gather(
        servers.astart("a", env=env, graceful=GRACEFUL),
        servers.astart("b", env=env, graceful=GRACEFUL),
        servers.astart("watch", env=env),
    )
    front = await Front([a, b]).start()
    observer = await Client(watch, users["observer"]).connect()
    observer.beat(TIMERS["HEARTBEAT_INTERVAL"])
    await observer.join(ROOM)

    sockets = await connect_all(front, [users[n] for n in names[:SOCKETS]])  # type: ignore[arg-type]
    for client in sockets:
        client.beat(TIMERS["HEARTBEAT_INTERVAL"])
    await asyncio.gather(*(c.join(ROOM, timeout=15) for c in sockets))
    streams = [await SseClient(front, users[n]).connect() for n in names[SOCKETS:]]  # type: ignore[arg-type]
    for stream in streams:
        await stream.join(ROOM)
    everybody = {users[n].id for n in names}
    assert front.served["a"] and front.served["b"], front.served  # spread over both

    def all_in() -> bool:
        return set(store.room_members(ROOM)) == everybody | {observer.id}

    await eventually(all_in, 10, "everybody in the room")
    await observer.send(type="watch", users=sorted(everybody))
    await observer.wait_for("presence.state", watch=True)
    heard: list[dict] = []
    observer.drain()
    observer.listeners.append(
        lambda f: (
            heard.append(f)
            if f.get("user") in everybody
            and (f["type"] in ("presence.join", "presence.leave") or f.get("state") == "offline")
            else None
        )
    )

    rollout = Rollout(
        dict(zip(names, sockets, strict=False)),
        dict(zip(names[SOCKETS:], streams, strict=True)),
        room=ROOM,
        heartbeat=TIMERS["HEARTBEAT_INTERVAL"],
        retry=RETRY,
    )
    try:
        for server in (a, b):
            # Gone at once, not after the graceful timeout; everybody back through the front,
            # on the live process, within the grace.
            done = await rollout.restart(server, GRACE)
            print(
                said(
                    f"{server.name} stopped (graceful timeout {GRACEFUL} s)",
                    done["stopped_s"],
                    STOPPED,
                ),
                f"\n{done['moved']} connections ({done['moved_streams']} streams) of {server.name} "
                f"back through the front {done['back_s']:.2f} s after its SIGTERM (grace "
                f"{GRACE:g} s; streams wait their retry: {RETRY:g} s first)",
            )
            assert done["code"] in (0, -15), server.log()  # uvicorn raises the signal again
            assert not done["graceful_exceeded"], server.log()
            assert done["stopped_s"] <= limit(STOPPED), server.log()
            assert done["moved"], f"nobody was on {server.name}"
            assert all_in()
        # The old connections' graces end and a sweep runs: still nothing heard.
        await asyncio.sleep(GRACE + TIMERS["SWEEP_INTERVAL"] + 1)  # a window for stray events
        assert all_in()
        assert heard == [], heard[:5]
        assert observer.open  # on the third process all along
    finally:
        await rollout.stop()
        await close_all([*sockets, observer])
        for stream in streams:
            await stream.close()
        await front.stop()
    for server in (a, b, watch):
        assert server.tracebacks() == 0, server.log()
