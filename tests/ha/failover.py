"""The failover scenario both topologies run (Sentinel and Cluster): sockets connected to two
ASGI servers, heartbeating, in rooms, observed from both servers; pages and the JSON API polled;
then the primary (or a master) is killed with SIGKILL, and the test measures how long until
every user's lease is renewed on the promoted replica."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from presence_app.store import Store
from tests.reliability.clients import close_all, connect_all
from tests.reliability.conftest import eventually
from tests.servers import Database
from tests.timing import limit, said

from .probes import API, PAGES, EventLog, HttpProbe, lease_expiries

ROOMS = ("lobby", "kitchen", "garden")
#: The timers of the failover runs: heartbeats every second as in the reliability suite, but a
#: lease that outlives a failover (a primary is declared down after 1 s of silence, then the
#: sentinels or the cluster elect and promote a replica: 2-4 s here) and the heal after it,
#: however loaded the machine (held to tests/timing.py's multiple of HEAL), so that a failover
#: shows no leave at all. With leases shorter than the failover, users would leave and come
#: back (the heartbeats re-take their leases): correct, but a flicker.
OVERRIDES = {"HEARTBEAT_INTERVAL": 1, "LEASE_TTL": 20, "DISCONNECT_GRACE": 1}
#: The promise of the heal: every lease renewed on the new primary one heartbeat interval after
#: the promotion, plus the flush and the sentinels' (or the cluster's) answer.
HEAL = OVERRIDES["HEARTBEAT_INTERVAL"] + 2.5


@dataclass
class Outcome:
    promoted_after: float = 0.0  # kill -> the replica is the primary (as the sentinels say)
    healed_after: float = 0.0  # kill -> every user's lease renewed on the new primary
    pages: dict[int, int] = field(default_factory=dict)
    api: dict[int, int] = field(default_factory=dict)
    flickers: int = 0
    slowest_request: float = 0.0

    def check(self, kind: str) -> None:
        """What every failover keeps: pages never fail, the JSON API answers 503 while no
        primary takes writes (its documented outage answer), never a 500, and 200 again
        afterwards; every lease renewed one heartbeat interval after the promotion (+ the flush
        and the sentinels' or cluster's answer); nobody left, when the leases outlived it."""
        heal = self.healed_after - self.promoted_after
        print(
            f"{kind} failover: promoted {self.promoted_after:.2f} s after the kill, every "
            f"lease renewed {self.healed_after:.2f} s after it ({heal:.2f} s after the "
            f"promotion); pages {self.pages}, JSON API {self.api}, "
            f"leaves/offlines seen {self.flickers}, slowest request "
            f"{self.slowest_request:.2f} s"
        )
        assert not any(status >= 500 or status == 0 for status in self.pages), self.pages
        assert set(self.api) <= {200, 503}, self.api
        print(said("every lease renewed after the promotion", heal, HEAL))
        assert heal <= limit(HEAL)
        if self.promoted_after < OVERRIDES["LEASE_TTL"] - OVERRIDES["HEARTBEAT_INTERVAL"]:
            assert self.flickers == 0


async def run_failover(
    servers: Any,
    db: Database,
    users: int,
    reader: Callable[[], Store],
    kill: Callable[[], None],
    promoted: Callable[[], bool],
    replicated: Callable[[], None],
) -> Outcome:
    """``reader()``: a store that follows the failover; ``kill()`` kills the primary;
    ``promoted()`` is true once a replica took over; ``replicated()`` waits until the replica
    holds what the primary acknowledged (WAIT)."""
    env = {"PRESENCE_OVERRIDES": json.dumps(OVERRIDES)}
    people = db.users([f"ha{i}" for i in range(users)] + ["watcher0", "watcher1"])
    first, second = await asyncio.gather(servers.astart("a", env=env), servers.astart("b", env=env))
    watchers = [people.pop("watcher0"), people.pop("watcher1")]
    observers = [*await connect_all(first, watchers[:1]), *await connect_all(second, watchers[1:])]
    halves = list(people.values())
    clients = [*await connect_all(first, halves[::2]), *await connect_all(second, halves[1::2])]
    members: dict[str, set[str]] = {room: set() for room in ROOMS}
    for observer in observers:
        observer.beat(1.0)
        for room in ROOMS:
            await observer.join(room)
            members[room].add(observer.id)
    for i, client in enumerate(clients):
        client.beat(1.0)
        room = ROOMS[i % len(ROOMS)]
        await client.join(room, timeout=15)
        members[room].add(client.id)
    everybody = {c.id for c in clients} | {o.id for o in observers}
    store = reader()

    def all_present() -> bool:
        return set(store.online()) == everybody and all(
            set(store.room_members(room)) == want for room, want in members.items()
        )

    await eventually(all_present, 15, "everybody online in their rooms")
    await asyncio.to_thread(replicated)
    before = {uid: p.last_seen for uid, p in store.get_many(sorted(everybody)).items()}
    # Redis' clock (the store's server_time() routes no plain command on a cluster: no key).
    seconds, micros = store.client.time()
    killed_at_redis = seconds + micros / 1e6
    events = EventLog(observers, {c.id for c in clients})
    loop = asyncio.get_running_loop()
    outcome = Outcome()

    def renewed() -> bool:
        # A heartbeat written after the kill sets an expiry past kill + LEASE_TTL.
        expiries = lease_expiries(store)
        return all(
            expiries.get(uid, 0) > killed_at_redis + OVERRIDES["LEASE_TTL"] for uid in everybody
        )

    with HttpProbe(first, clients[0].user) as probe:
        await asyncio.sleep(1)  # the probe's first answers, before the kill
        start = loop.time()
        await asyncio.to_thread(kill)
        outcome.promoted_after = await eventually(promoted, 30, "a replica promoted", interval=0.05)
        await eventually(renewed, 30, "every lease renewed on the new primary")
        outcome.healed_after = loop.time() - start
        await asyncio.sleep(1)  # answers after the heal too
    outcome.pages = dict(probe.answers(PAGES))
    outcome.api = dict(probe.answers(API))
    outcome.slowest_request = probe.slowest
    assert all(c.open for c in clients + observers), "a socket was dropped"
    assert all_present()  # no one lost, no ghost
    after = {uid: p.last_seen for uid, p in store.get_many(sorted(everybody)).items()}
    lost = {uid for uid in everybody if (after[uid] or 0) < (before[uid] or 0)}
    assert not lost, f"last seen went back for {sorted(lost)[:5]}"
    outcome.flickers = len(events.flickers)
    # Events still flow through the channel layer on the new primary.
    await clients[0].send(type="status", state="dnd")
    await asyncio.gather(
        *(
            o.wait_for("presence.update", user=clients[0].id, state="dnd", timeout=10)
            for o in observers
        )
    )
    # Everyone leaves cleanly: nothing stays behind (no ghost) once the grace has passed.
    await close_all(clients)
    await eventually(
        lambda: (
            set(store.online()) == {o.id for o in observers}
            and all(set(store.room_members(room)) == {o.id for o in observers} for room in ROOMS)
        ),
        # Gone a grace after their close; a close whose Redis call a loaded machine timed out
        # (2 s, REDIS_OPTIONS) is taken for an outage, and its lease left to run out.
        OVERRIDES["LEASE_TTL"] + 15,
        "only the observers left",
    )
    await close_all(observers)
    for server in (first, second):
        assert server.tracebacks() == 0, server.log()
    return outcome
