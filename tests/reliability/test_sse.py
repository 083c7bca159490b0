"""Presence over SSE + REST against real servers (uvicorn and daphne): a WebSocket user and an
SSE user see each other join, go idle, set dnd and leave; the stream sends a snapshot then
diffs, keeps its lease alive with comment lines alone, resumes after a reconnect with
``Last-Event-ID`` without a leave/join, and ends its lease (after the grace) when it closes;
the REST calls meet the socket's checks (CSRF, owner of the stream, validation, CAN_JOIN,
rate limit)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

import pytest
import redis

from tests.frame_waits import about
from tests.sse_client import HttpError, SseClient, request
from tests.timing import limit

from .clients import Client
from .conftest import eventually
from .settings import TIMERS

pytestmark = [pytest.mark.timeout(120), pytest.mark.parametrize("kind", ["uvicorn", "daphne"])]

#: A closed connection is gone a grace and a sweep later (the promise), held to tests/timing.py's
#: multiple of it.
GONE = limit(TIMERS["DISCONNECT_GRACE"] + TIMERS["SWEEP_INTERVAL"])


async def test_socket_and_sse_users_see_each_other(db, servers, store, kind):
    users = db.users(["alice", "bob"])
    server = await servers.astart(
        server=kind, env={"PRESENCE_OVERRIDES": json.dumps({"IDLE_AFTER": 2})}
    )
    ws = await Client(server, users["alice"]).connect()
    ws.beat(0.5)
    sse = await SseClient(server, users["bob"]).connect()
    assert sse.hello["transport"] == "sse" and sse.hello["user"] == users["bob"].id
    assert sse.hello["stream"] and sse.hello["resumed"] is False

    await ws.join("doc-1")
    state = await sse.join("doc-1")  # the snapshot first: alice is there
    assert [m["user"] for m in state["members"]] == [users["alice"].id, users["bob"].id]
    await ws.wait_for("presence.join", room="doc-1", user=users["bob"].id)

    # Both go idle (heartbeats and keep-alives are not activity), both see it.
    await ws.wait_for("presence.update", timeout=15, user=users["bob"].id, state="idle")
    await sse.wait_for("presence.update", timeout=15, user=users["alice"].id, state="idle")
    # Activity by REST brings bob back; dnd both ways.
    assert (await sse.post("activity"))[0] == 200
    await ws.wait_for("presence.update", timeout=10, user=users["bob"].id, state="online")
    await ws.send(type="status", state="dnd")
    await sse.wait_for("presence.update", timeout=10, user=users["alice"].id, state="dnd")
    status, body = await sse.post("status", state="dnd", message="Writing")
    assert status == 200, body
    update = await ws.wait_for("presence.update", timeout=10, user=users["bob"].id, state="dnd")
    assert update["message"] == "Writing"
    await sse.wait_for("presence.update", timeout=10, user=users["bob"].id, self=True)

    # Typing by REST reaches the socket; bob leaves by REST, then alice leaves.
    assert (await sse.post("typing", room="doc-1"))[0] == 200
    await ws.wait_for("presence.typing", timeout=10, user=users["bob"].id, room="doc-1")
    assert (await sse.post("leave", room="doc-1"))[0] == 200
    await ws.wait_for("presence.leave", timeout=10, user=users["bob"].id, room="doc-1")
    assert (await sse.join("doc-1"))["room"] == "doc-1"
    await ws.close()
    await sse.wait_for("presence.leave", timeout=GONE, user=users["alice"].id, room="doc-1")
    await sse.close()
    await eventually(lambda: store.room_members("doc-1") == [], GONE, "bob's lease ended")
    assert server.tracebacks() == 0, server.log()


async def test_keepalive_holds_the_lease_and_resume_does_not_flicker(db, servers, store, kind):
    users = db.users(["alice", "bob"])
    server = await servers.astart(server=kind)
    watcher = await Client(server, users["alice"]).connect()
    watcher.beat(0.5)
    await watcher.join("doc-2")
    sse = await SseClient(server, users["bob"]).connect()
    await sse.join("doc-2")
    await watcher.wait_for("presence.join", room="doc-2", user=users["bob"].id)

    # No REST heartbeat at all for 3 lease lifetimes: the comment lines alone keep bob in.
    await asyncio.sleep(TIMERS["LEASE_TTL"] * 3)
    assert sse.comments >= TIMERS["LEASE_TTL"] * 2, sse.comments
    assert store.room_members("doc-2") == [users["alice"].id, users["bob"].id]

    # The stream drops; the browser reconnects within the grace with its Last-Event-ID.
    assert sse.last_id
    await sse.close()
    await sse.connect(resume=True)
    assert sse.hello["resumed"] is True
    state = await sse.wait_for("presence.state", timeout=10, room="doc-2")  # unasked
    assert {m["user"] for m in state["members"]} == {users["alice"].id, users["bob"].id}
    # Nobody saw bob leave or come back, well past the grace and a sweep.
    seen = about(await watcher.collect(TIMERS["DISCONNECT_GRACE"] + 3), users["bob"].id)
    assert [f for f in seen if f["type"] in ("presence.leave", "presence.join")] == [], seen
    assert store.room_members("doc-2") == [users["alice"].id, users["bob"].id]
    # REST still drives the resumed stream (its new name came with the new hello).
    assert (await sse.post("leave", room="doc-2"))[0] == 200
    await watcher.wait_for("presence.leave", timeout=10, room="doc-2", user=users["bob"].id)

    # A stream that closes for good: the lease ends after the grace, bob goes offline.
    await sse.close()
    await eventually(lambda: store.online() == [users["alice"].id], GONE, "bob went offline")
    await watcher.close()
    assert server.tracebacks() == 0, server.log()


async def test_the_replaced_stream_closing_late_does_not_end_the_resumed_one(
    db, servers, store, kind
):
    """A proxy may keep the old stream open after the browser reconnected: the old one's close
    comes after the new one took over the lease, and must not end it. Heartbeats every 2 s and
    a grace of 1 s: beating only at the heartbeat interval would let the cut lease expire."""
    users = db.users(["alice", "bob"])
    timers = {"HEARTBEAT_INTERVAL": 2, "LEASE_TTL": 6, "DISCONNECT_GRACE": 1}
    server = await servers.astart(server=kind, env={"PRESENCE_OVERRIDES": json.dumps(timers)})
    watcher = await Client(server, users["alice"]).connect()
    watcher.beat(0.5)
    await watcher.join("doc-3")
    old = await SseClient(server, users["bob"], name="bob-old").connect()
    await old.join("doc-3")
    await watcher.wait_for("presence.join", room="doc-3", user=users["bob"].id)
    new = SseClient(server, users["bob"], name="bob-new")
    new.last_id = old.last_id
    await new.connect(resume=True)
    await new.wait_for("presence.state", timeout=10, room="doc-3")
    await old.close()  # cuts the shared lease to the grace; the new stream's beats renew it
    seen = about(await watcher.collect(timers["LEASE_TTL"] + 2), users["bob"].id)
    assert [f for f in seen if f["type"] in ("presence.leave", "presence.join")] == [], seen
    assert store.room_members("doc-3") == [users["alice"].id, users["bob"].id]
    await new.close()
    await watcher.close()
    assert server.tracebacks() == 0, server.log()


async def test_rest_calls_meet_the_sockets_checks(db, servers, store, redis_server, kind):
    users = db.users(["alice", "bob"])
    server = await servers.astart(server=kind)
    # Anonymous: 401 for the stream and for REST.
    with pytest.raises(HttpError) as refused:
        await SseClient(server, None).connect()
    assert refused.value.status == 401
    status, _ = await request(server, "POST", "/presence/api/stream/join/", None, body=b"{}")
    assert status in (401, 403)  # CSRF may answer first

    alice = await SseClient(server, users["alice"]).connect()
    bob = await SseClient(server, users["bob"]).connect()
    # No CSRF token: Django's middleware refuses it.
    assert (await alice.post("join", csrf=False, room="lobby"))[0] == 403
    # bob cannot drive alice's stream with her stream name, nor with a forged one.
    status, body = await bob.post("join", stream=alice.hello["stream"], room="lobby")
    assert (status, body["code"]) == (403, "forbidden")
    assert (await bob.post("join", stream="forged", room="lobby"))[0] == 403
    # The socket's validation, hook and limits, with the socket's error codes.
    for fields, code, want in [
        ({"room": "bad name!"}, 400, "invalid"),
        ({"room": "closed-vault"}, 403, "forbidden"),
        ({}, 400, "invalid"),
    ]:
        status, body = await alice.post("join", **fields)
        assert (status, body.get("code")) == (code, want), (fields, body)
    assert (await alice.post("leave", room="never-joined"))[1]["code"] == "not_joined"
    assert (await alice.post("status", state="sleepy"))[0] == 400
    assert (await alice.post("nonsense"))[1]["code"] == "unknown_type"
    # Over MAX_FRAMES_PER_SECOND: 429 for the extra ones, and nothing joined by them.
    rate = alice.hello["limits"]["frames_per_second"]
    answers = await asyncio.gather(*(alice.post("typing", room="lobby") for _ in range(rate * 3)))
    assert {s for s, _ in answers} <= {409, 429} and any(s == 429 for s, _ in answers)
    assert store.room_members("lobby") == []
    # Every call's reply channel was let go of: the two streams' channels are all that is left.
    streams = redis.Redis.from_url(redis_server.url)
    await eventually(
        lambda: len(streams.pubsub_channels("*specific.*")) == 2,
        10,
        "reply channels unsubscribed",
        detail=lambda: streams.pubsub_channels("*specific.*"),
    )
    # A closed stream: its name leads nowhere (404 once nobody answers).
    await alice.close()
    status, body = await alice.post("join", room="lobby")
    assert (status, body["code"]) == (404, "gone")
    await bob.close()
    await eventually(
        lambda: streams.pubsub_channels("*specific.*") == [],
        10,
        "the streams' channels unsubscribed",
    )
    streams.close()
    assert server.tracebacks() == 0, server.log()


#: Streams opened at once by the test below (each a user of its own).
STREAMS = 10


def held(pid: int, database: str) -> tuple[int, int]:
    """(threads, descriptors open on the database file) of the process ``pid``."""
    with open(f"/proc/{pid}/status") as status:
        threads = next(int(line.split()[1]) for line in status if line.startswith("Threads:"))
    files = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            files += os.readlink(f"/proc/{pid}/fd/{fd}") == database
    return threads, files


async def test_an_open_stream_holds_no_thread_nor_database_connection(db, servers, kind):
    """Django serves each ASGI request on a thread of its own (a ThreadSensitiveContext) that
    opens the session's database connection and lives until the response ends: for a stream,
    its whole life, 1.6-3x a socket's memory (docs/benchmarks.md, row 11). An open stream lets
    both go (lifecycle.leave_request_thread), and still works: its hello, a join, its close."""
    users = db.users([f"s{i}" for i in range(STREAMS + 1)])
    server = await servers.astart(server=kind)
    database = os.path.realpath(db.path)
    first = await SseClient(server, users["s0"]).connect()  # start-up's threads and connections
    await first.join("doc-0")
    base = held(server.pid, database)
    streams = [await SseClient(server, users[f"s{i}"]).connect() for i in range(1, STREAMS + 1)]

    def grown() -> tuple[int, int]:
        threads, files = held(server.pid, database)
        return threads - base[0], files - base[1]

    # The request threads end as the streams open (one of them may still be on its way out);
    # before the fix each stream kept one, and the connection it opened.
    await eventually(
        lambda: grown()[0] <= 1 and grown()[1] <= 0,
        30,
        "no thread nor connection per stream",
        detail=grown,
    )
    state = await streams[-1].join("doc-0")  # the streams carry on: their sync calls have a thread
    assert {m["user"] for m in state["members"]} == {users["s0"].id, users[f"s{STREAMS}"].id}
    for stream in [first, *streams]:
        await stream.close()
    assert server.tracebacks() == 0, server.log()
