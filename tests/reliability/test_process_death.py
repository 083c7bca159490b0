"""An ASGI process (uvicorn) dies (SIGKILL) holding 200 sockets: no close frames, no
disconnect(), no clean-up. Another process (daphne, on the same Redis and channel layer: the
pub/sub layer, and RedisChannelLayer sized for bursts) keeps serving two observers in every
room. Within LEASE_TTL + SWEEP_INTERVAL (the promise; held to tests/timing.py's multiple of it)
the survivor's sweeper evicts all 200 users and the observers receive every leave (and the
offline of the users they watch); afterwards the store holds no trace of the dead process'
connections: zero ghosts."""

from __future__ import annotations

import asyncio

import pytest

from presence_app.store.keys import KeySpace
from tests.timing import limit, said

from .clients import close_all, connect_all
from .conftest import eventually
from .settings import LOADED, TIMERS

pytestmark = pytest.mark.timeout(180)

VICTIMS = 200
ROOMS = [f"room-{i}" for i in range(8)]
WATCHED = 50
#: Both servers' timers: settings.LOADED's, with a lease of 10 s. 200 sockets join at once,
#: and a loaded server handles each socket's heartbeats behind its join, seconds late (3.2 s
#: seen): under the shared 3 s some were closed as silent (4408) before their join was
#: answered. 10 s leaves 9 s of such lag, and a wait after the kill of 10.5 s (the promise) to
#: 31.5 s (its limit).
TIMERS_HERE = {**LOADED, "LEASE_TTL": 10}
#: The promise: a lease outlives its last heartbeat by LEASE_TTL, and a sweep runs at most
#: SWEEP_INTERVAL later (the sweep itself and the fan-out of 200 leaves are within the slack,
#: tests/timing.py).
PROMISE = TIMERS_HERE["LEASE_TTL"] + TIMERS["SWEEP_INTERVAL"]


@pytest.fixture
def timers():
    return TIMERS_HERE


@pytest.mark.parametrize("layer", ["pubsub", "core"])
async def test_kill_9_evicts_every_user_of_the_dead_process(db, servers, store, layer):
    users = db.users([f"victim{i}" for i in range(VICTIMS)] + ["watcher0", "watcher1"])
    env = {"RELIABILITY_LAYER": layer}
    doomed, survivor = await asyncio.gather(
        servers.astart("doomed", env=env), servers.astart("survivor", server="daphne", env=env)
    )
    observers = await connect_all(survivor, [users["watcher0"], users["watcher1"]])
    for observer in observers:
        observer.beat(TIMERS["HEARTBEAT_INTERVAL"])
        for room in ROOMS:
            await observer.join(room)

    victims = await connect_all(doomed, [users[f"victim{i}"] for i in range(VICTIMS)])
    room_of = {}
    for i, victim in enumerate(victims):
        victim.beat(TIMERS["HEARTBEAT_INTERVAL"])
        room_of[victim.id] = ROOMS[i % len(ROOMS)]
    # Setting up is not what is measured: the joins go a few at a time. All 200 at once queue
    # behind each other in the server (the pub/sub layer subscribes to one group at a time),
    # and each socket's heartbeats behind its join: on a loaded machine, seconds past the lease.
    gate = asyncio.Semaphore(20)

    async def join(victim):
        async with gate:
            await victim.join(room_of[victim.id], timeout=60)

    await asyncio.gather(*(join(v) for v in victims))
    watched = sorted(room_of)[:WATCHED]
    for observer in observers:
        await observer.send(type="watch", users=watched)
        await observer.wait_for("presence.state", watch=True)
    watchers = {o.id for o in observers}
    everybody = set(room_of) | watchers

    def all_in() -> bool:
        return set(store.online()) == everybody and all(
            set(store.room_members(room)) == watchers | {u for u, r in room_of.items() if r == room}
            for room in ROOMS
        )

    await eventually(all_in, 30, "every victim online in their room")

    # Each observer notes when each (user, room) leave and each offline arrives.
    loop = asyncio.get_running_loop()
    leaves: list[dict[tuple[str, str], float]] = [{}, {}]
    offline: list[dict[str, float]] = [{}, {}]
    repeats: list[tuple[str, str]] = []
    for i, observer in enumerate(observers):
        observer.drain()

        def note(frame, i=i):
            if frame["type"] == "presence.leave":
                key = (frame["user"], frame["room"])
                if key in leaves[i]:
                    repeats.append(key)
                leaves[i].setdefault(key, loop.time())
            elif frame["type"] == "presence.update" and frame["state"] == "offline":
                offline[i].setdefault(frame["user"], loop.time())

        observer.listeners.append(note)

    killed_at = loop.time()
    doomed.kill()
    await asyncio.gather(*(v.closed.wait() for v in victims))
    assert {v.close_code for v in victims} == {1006}  # no close frame: the process is gone

    expected = set(room_of.items())

    def all_left() -> bool:
        return all(set(seen) == expected for seen in leaves) and all(
            set(seen) >= set(watched) for seen in offline
        )

    def missing() -> dict:
        return {
            "leaves": [len(expected - set(seen)) for seen in leaves],
            "offline": [len(set(watched) - set(seen)) for seen in offline],
            "online": len(store.online()),
            "sample": sorted(expected - set(leaves[0]))[:5],
        }

    await eventually(all_left, limit(PROMISE), "every leave at both observers", detail=missing)
    last = max(max(seen.values()) for seen in leaves + offline) - killed_at
    first = min(min(seen.values()) for seen in leaves) - killed_at
    print(said(f"leaves arrived from {first:.2f} s, the last", last, PROMISE), "after the kill")
    assert last <= limit(PROMISE)
    # Leaves only for users that were in the room (all_left), each once, and nothing about the
    # observers themselves.
    assert repeats == []
    for observer in observers:
        for frame in observer.drain():
            assert frame.get("user") not in watchers, frame

    # Zero ghosts: only the observers are left, in Redis as in every read.
    assert set(store.online()) == watchers
    assert store.online_count() == 2
    for room in ROOMS:
        assert set(store.room_members(room)) == watchers
    assert dict(store.rooms()) == dict.fromkeys(ROOMS, 2)
    rooms_of = store.user_rooms_many(list(room_of))
    assert all(rooms == [] for rooms in rooms_of.values())
    presences = store.get_many(list(room_of))
    assert {p.state for p in presences.values()} == {"offline"}
    tag = store.keys.tag(0)
    listed = store.client.zrange(KeySpace.seen(tag), 0, -1)  # those with a sign of life
    assert {uid.decode() for uid in listed} == watchers
    assert store.sweep() == []  # nothing left to evict
    # The survivor shrugged it off: still serving, nothing logged as an error.
    assert await asyncio.to_thread(survivor.answers, 30)
    assert survivor.tracebacks() == 0, survivor.log()
    await close_all(observers)
