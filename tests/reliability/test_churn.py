"""Churn: 500 simulated browser tabs connect, join, leave, set their status and disconnect at
random against two real server processes for a bounded time (tests/reliability/churn.py).

When they stop and the grace has passed, the store holds exactly the ground truth the clients
recorded: every connected user online and in their rooms, with their status; nobody else (no
ghosts, none missing). When everybody has left and METADATA_TTL has passed, Redis holds what it
held before the crowd came: the same keys, and the same memory for data.

The CI variant runs ~10 s of churn; ``--run-slow`` adds a long one.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import redis

from presence_app.store import scripts
from presence_app.store.keys import KeySpace

from .churn import Simulation, Timers
from .conftest import eventually, servers_store, store_config
from .settings import LOADED, TIMERS

METADATA_TTL = 3  # a user's status and last seen outlive them this long (short, to see it go)
TIMER = Timers(
    grace=TIMERS["DISCONNECT_GRACE"],
    sweep=TIMERS["SWEEP_INTERVAL"],
    metadata_ttl=METADATA_TTL,
    heartbeat=TIMERS["HEARTBEAT_INTERVAL"],
)
#: Keys that come and go on their own: the job locks (they expire after their interval).
TRANSIENT = re.compile(r":lock:")


@pytest.fixture
def timers():
    """Hundreds of sockets on two servers, and nothing measured of the lease or of an outage:
    settings.LOADED, so that a loaded server behind its sockets' frames closes none of them as
    silent (4408), and takes no late answer of Redis for an outage (an ``unavailable`` join,
    a close whose lease is left to run out)."""
    return LOADED


def snapshot(client: redis.Redis) -> tuple[set[str], int]:
    """(every key but the transient ones, used_memory)."""
    keys = {k.decode() for k in client.scan_iter(count=1000)}
    return {k for k in keys if not TRANSIENT.search(k)}, client.info("memory")["used_memory"]


async def start(servers, processes: int) -> list:
    env = {"PRESENCE_OVERRIDES": json.dumps({"METADATA_TTL": METADATA_TTL})}
    return list(
        await asyncio.gather(*(servers.astart(f"server{i}", env=env) for i in range(processes)))
    )


async def stop(started: list) -> None:
    await asyncio.gather(*(asyncio.to_thread(server.stop) for server in started))
    for server in started:
        assert server.tracebacks() == 0, server.log()


async def churn(
    db,
    servers,
    redis_server,
    prefix,
    timers,
    *,
    clients: int,
    tabs: int,
    rooms: int,
    seconds: float,
    mean_gap: float,
    processes: int = 2,
) -> None:
    users = list(db.users([f"churn{i}" for i in range(clients - tabs)]).values())
    client = redis.Redis.from_url(redis_server.url)
    store = servers_store(client, store_config(prefix, metadata_ttl=METADATA_TTL, **timers))
    # The waits for the store to settle end when it has; a loaded machine may take long.
    settle = TIMER.grace + TIMER.sweep + 30

    def user_keys() -> list:
        """The users' records: the fields of one hash."""
        return client.hkeys(KeySpace.records(store.keys.tag(0)))

    # Warm up (scripts loaded, a sweep and a sample recorded), let it all expire, and take the
    # "before" picture with the servers stopped: their pooled connections are not data.
    started = await start(servers, processes)
    warm = Simulation(started, users[:2], tabs=0, rooms=2, timers=TIMER, mean_gap=0.1)
    await warm.run(1.0)
    await warm.close_all()
    await eventually(lambda: not user_keys(), METADATA_TTL + settle, "the warm-up expired")
    await stop(started)
    for script in scripts.load().values():  # the test's own reads load scripts too
        client.script_load(script.source)
    keys_before, memory_before = snapshot(client)

    started = await start(servers, processes)
    sim = Simulation(started, users, tabs=tabs, rooms=rooms, timers=TIMER, mean_gap=mean_gap)
    await sim.run(seconds)
    unknown = sum(not u.known for u in sim.users.values())
    print(
        f"churn: {dict(sim.counts)}; {len(sim.connected())} users connected at the end, "
        f"{unknown} of whom the store may have forgotten the status"
    )
    assert sim.errors == []
    assert sum(sim.counts.values()) > clients  # it did churn

    # Once the graces have run out and a sweep passed, the store is the truth, and stays it.
    def matches() -> bool:
        return not sim.mismatches(store)

    await eventually(
        matches,
        settle,
        "the store equals the ground truth",
        interval=0.25,
        detail=lambda: sim.mismatches(store)[:10],
    )
    await asyncio.sleep(TIMER.sweep * 2)  # a window: the truth it stays
    assert await asyncio.to_thread(sim.mismatches, store) == []

    # Everybody leaves: then nothing is left but what was there before.
    await sim.close_all()
    await eventually(lambda: store.online(include_invisible=True) == [], settle, "all offline")
    await eventually(lambda: not user_keys(), METADATA_TTL + settle, "the users' keys expired")
    peak = client.info("memory")["used_memory_peak"]
    await stop(started)
    keys_after, memory_after = snapshot(client)
    print(f"redis used_memory {memory_before} -> peak {peak} -> {memory_after} bytes")
    assert sorted(keys_after) == sorted(keys_before)
    # The same size, but for what Redis keeps of a burst outside any key (its dict tables and
    # allocator state settle at a plateau, whatever the number of users: tens of KB).
    assert memory_after - memory_before <= 256 * 1024
    client.close()


async def test_churn_500_clients(db, servers, redis_server, prefix, timers):
    await churn(
        db,
        servers,
        redis_server,
        prefix,
        timers,
        clients=500,
        tabs=100,
        rooms=30,
        seconds=10,
        mean_gap=3.0,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_churn_long(db, servers, redis_server, prefix, timers):
    await churn(
        db,
        servers,
        redis_server,
        prefix,
        timers,
        clients=500,
        tabs=150,
        rooms=40,
        seconds=180,
        mean_gap=1.5,
        processes=3,
    )
