"""Scale-out on real processes: two ``uvicorn project.asgi:application`` servers on two ports,
one SQLite file, one Redis (or presence on the local Redis Cluster), real WebSocket clients.

- Events cross processes both ways: join, leave, update and typing from clients of process 2
  reach clients of process 1, and the other way round.
- Process 2 is killed (SIGKILL: nothing closed, nothing flushed): the sweep on process 1 evicts
  its users within LEASE_TTL + SWEEP_INTERVAL (held to tests/timing.py's multiple of it), with
  the leave and offline events; a user who also has a tab on process 1 stays.

Variants: the channel layer project/settings.py chooses (RedisPubSubChannelLayer) on a single
Redis and with presence on the Cluster, and RedisChannelLayer on a single Redis.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from presence_app.store.keys import KeySpace

from ..frame_waits import about
from ..servers import AsgiServer, Database
from ..timing import limit, said
from .client import Tab
from .settings import TIMERS

USERS = ("alice", "bob", "carol", "dave")

VARIANTS = [
    pytest.param(("single", "pubsub"), id="redis-pubsub"),
    pytest.param(("cluster", "pubsub"), id="cluster-pubsub", marks=pytest.mark.cluster),
    pytest.param(("single", "core"), id="redis-core"),
]


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    """The SQLite file both servers share, migrated, with the users logged in."""
    db = Database(
        tmp_path_factory.mktemp("scaleout") / "db.sqlite3", settings="tests.scaleout.settings"
    ).migrate()
    return db, db.users(list(USERS))


@pytest.fixture(params=VARIANTS)
def servers(request, database):
    """Two server processes on the same database, Redis (or Cluster) and channel layer, with
    a key prefix of this test's own."""
    store, layer = request.param
    db, users = database
    env = {"SCALEOUT_LAYER": layer, "SCALEOUT_PREFIX": f"scaleout-{uuid.uuid4().hex[:8]}"}
    if store == "cluster":
        env["SCALEOUT_CLUSTER_URL"] = request.getfixturevalue("redis_cluster").url
    pair = [AsgiServer(db, env=env, name=f"p{i}") for i in (1, 2)]
    try:
        with ThreadPoolExecutor(2) as pool:  # both start at once: Django loads in each
            list(pool.map(lambda server: server.start(), pair))
        yield pair[0], pair[1], users
    finally:
        for server in pair:
            server.stop()
        for server in pair:
            print(f"--- {server.name} log ---\n{server.log()}")


def earliest_eviction(server: AsgiServer, user_ids: list[str]) -> float:
    """The earliest time (seconds since the epoch, Redis' clock) the sweep may end one of the
    users, read from ``server``'s key space: their last sign of life + ``LEASE_TTL`` (a plain
    user's process lease, renewed by every call of the process, may end later: the sweep's
    pass 3 ends a user whose own sign of life is older than the span, whatever the process)."""
    cluster = server.env.get("SCALEOUT_CLUSTER_URL")
    keys = KeySpace(server.env["SCALEOUT_PREFIX"], 4 if cluster else 1)
    client = (
        redis.RedisCluster.from_url(cluster)
        if cluster
        else redis.Redis.from_url(server.env["REDIS_URL"])
    )
    try:
        seen = [client.zscore(KeySpace.seen(keys.tag_for_user(uid)), uid) for uid in user_ids]
    finally:
        client.close()
    assert None not in seen, seen  # each one listed
    return min(seen) + TIMERS["LEASE_TTL"]


async def open_tab(server: AsgiServer, users, name: str, suffix: str) -> Tab:
    tab = await Tab.open(
        server.ws_url, users[name].session, f"{name}@{suffix}", origin=server.origin
    )
    assert tab.user == users[name].id
    tab.beat()
    return tab


async def test_events_cross_both_ways(servers):
    p1, p2, users = servers
    a1 = await open_tab(p1, users, "alice", "p1")
    b2 = await open_tab(p2, users, "bob", "p2")
    c1 = await open_tab(p1, users, "carol", "p1")
    d2 = await open_tab(p2, users, "dave", "p2")
    tabs = [a1, b2, c1, d2]
    try:
        # join: 2 -> 1, then 1 -> 2, then 2 -> 1 again; each snapshot lists who came before
        await a1.joined("lobby")
        state = await b2.joined("lobby")
        assert [m["user"] for m in state["members"]] == [a1.user, b2.user]
        event = await a1.wait_for("presence.join", user=b2.user)
        assert (event["room"], event["state"]) == ("lobby", "online")
        await c1.joined("lobby")
        await b2.wait_for("presence.join", user=c1.user, room="lobby")
        state = await d2.joined("lobby")
        assert {m["user"] for m in state["members"]} == {a1.user, b2.user, c1.user, d2.user}
        await a1.wait_for("presence.join", user=d2.user, room="lobby")

        # update: 2 -> 1 and 1 -> 2
        await b2.send(type="status", state="dnd", message="In a meeting")
        event = await a1.wait_for("presence.update", user=b2.user)
        assert (event["state"], event["message"]) == ("dnd", "In a meeting")
        await a1.send(type="status", state="dnd")
        await b2.wait_for("presence.update", user=a1.user, state="dnd")

        # typing: 2 -> 1 and 1 -> 2 (never echoed to the typist)
        await b2.send(type="typing", room="lobby")
        await a1.wait_for("presence.typing", user=b2.user, room="lobby")
        await a1.send(type="typing", room="lobby")
        await b2.wait_for("presence.typing", user=a1.user, room="lobby")

        # leave: 2 -> 1 and 1 -> 2
        await b2.send(type="leave", room="lobby")
        event = await a1.wait_for("presence.leave", user=b2.user)
        assert (event["room"], event["state"]) == ("lobby", "dnd")  # left the room, still on (dnd)
        await c1.send(type="leave", room="lobby")
        await d2.wait_for("presence.leave", user=c1.user, room="lobby")

        # a clean close on process 2: process 1's tabs hear the leave once the grace is over
        await d2.close()
        grace = TIMERS["DISCONNECT_GRACE"] + TIMERS["SWEEP_INTERVAL"]
        await a1.wait_for("presence.leave", timeout=limit(grace), user=d2.user, room="lobby")
        assert [f for f in b2.seen if f["type"] == "presence.typing" and f["user"] == b2.user] == []
    finally:
        for tab in tabs:
            await tab.close()
    for server in (p1, p2):
        assert server.tracebacks() == 0, server.log()


async def test_killed_process_is_swept_by_the_other(servers):
    p1, p2, users = servers
    a1 = await open_tab(p1, users, "alice", "p1")
    c1 = await open_tab(p1, users, "carol", "p1")
    b2 = await open_tab(p2, users, "bob", "p2")
    c2 = await open_tab(p2, users, "carol", "p2")  # carol has a tab on each process
    d2 = await open_tab(p2, users, "dave", "p2")
    tabs = [a1, c1, b2, c2, d2]
    try:
        await a1.joined("lobby")
        await a1.send(type="watch", users=[b2.user, d2.user, c1.user])
        await a1.wait_for("presence.state", watch=True)
        for tab in (c1, b2, c2, d2):
            await tab.joined("lobby")
        await a1.wait_all(
            *(("presence.join", {"user": t.user, "room": "lobby"}) for t in (c1, b2, d2))
        )
        # The victims' last signs of life, read just before the kill (a renewal after the read
        # only moves them later): nobody may be evicted before theirs + LEASE_TTL.
        deadline = await asyncio.to_thread(earliest_eviction, p2, [b2.user, d2.user])
        seen_before = len(a1.seen)
        loop = asyncio.get_running_loop()
        start = loop.time()
        p2.kill()
        promise = TIMERS["LEASE_TTL"] + TIMERS["SWEEP_INTERVAL"]
        await a1.wait_all(
            ("presence.leave", {"user": b2.user, "room": "lobby"}),
            ("presence.leave", {"user": d2.user, "room": "lobby"}),
            ("presence.update", {"user": b2.user, "state": "offline"}),
            ("presence.update", {"user": d2.user, "state": "offline"}),
            timeout=limit(promise),
        )
        elapsed, now = loop.time() - start, time.time()
        print(
            said("process 2's users evicted", elapsed, promise),
            f"after the kill, {now - deadline:.2f} s after the earliest possible eviction",
        )
        # Not before their signs of life ran out (Redis' clock and ours: the same machine's), and
        # within the promise (from the last renewal, which came before the kill).
        assert now >= deadline - 0.05, (now, deadline)
        assert elapsed <= limit(promise), elapsed

        # Carol's tab on process 1 keeps her online and in the room: no leave, no offline.
        state = await a1.joined("lobby")  # joined already: a fresh snapshot
        assert {m["user"] for m in state["members"]} == {a1.user, c1.user}
        assert about(a1.seen[seen_before:], c1.user) == []
        # Process 1 still serves: its sockets carry on.
        await c1.send(type="typing", room="lobby")
        await a1.wait_for("presence.typing", user=c1.user)
    finally:
        for tab in tabs:
            await tab.close()
    assert p1.tracebacks() == 0, p1.log()
