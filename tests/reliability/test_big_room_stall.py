"""Redis stalls during a join storm (issue 44): two real servers on the pub/sub layer, real
sockets joining one room within a few seconds, and the test's own redis-server stopped
(SIGSTOP) for longer than the servers' Redis timeout in the middle of it, then let go.

While it is stopped the servers' calls time out (a join is answered ``unavailable``, which the
client asks again a moment later, as presence.js does), and whatever was on its way may or may
not have been done. Once it is back, every socket's roster, kept as a browser keeps it (its
snapshot's pages, then each diff or join and leave), must come to equal the room's true
membership, every socket's user in it once, no socket closed, and no server may print a
traceback. Every wait ends on the event, within generous limits (tests/timing.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from tests.timing import limit, said

from .clients import Client, close_all
from .conftest import eventually
from .settings import TIMERS

pytestmark = pytest.mark.timeout(300)

ROOM = "arena"
N = 60
SPREAD = 3.0  # the storm's joins are sent within this
#: The servers' Redis timeout (presence_app.conf's REDIS_OPTIONS: 2 s): the stall outlasts it,
#: so calls on their way fail, some of them after Redis did their work.
REDIS_TIMEOUT = 2.0
STALL = 2.5 * REDIS_TIMEOUT
#: How long after Redis is back every roster may take: a heartbeat (the lease's recovery), the
#: client's retry of a refused join, a few membership ticks; the limit's slack on top.
SETTLE = TIMERS["HEARTBEAT_INTERVAL"] + 2 + 5 * TIMERS["HEARTBEAT_FLUSH_INTERVAL"] + 5


@pytest.fixture
def timers() -> dict[str, float]:
    # A lease outlasting the stall, so that what is checked is the storm's events, not leases
    # run out while Redis slept (tests/reliability/test_redis_outage.py checks those).
    return {"LEASE_TTL": 4 * STALL}


class Roster:
    """One socket's view of the room, as presence.js keeps it, and its join asked again when
    Redis refused it (``unavailable``)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.members: set[str] = set()
        self.paging: list[str] = []  # the members of the snapshot being received
        self.repeated: list[tuple[str, str]] = []  # (a frame's kind, a user it lists twice)
        self.retries = 0
        self.snapshots = 0
        client.listeners.append(self.frame)

    def frame(self, f: dict[str, Any]) -> None:
        kind = f.get("type")
        if kind == "error" and f.get("frame") == "join" and f.get("room") == ROOM:
            if f.get("code") == "unavailable":
                self.retries += 1
                asyncio.get_running_loop().call_later(1.0, self.retry)
            return
        if f.get("room") != ROOM:
            return
        if kind == "presence.state":
            if not f.get("page"):
                self.paging = []
            self.paging += [m["user"] for m in f["members"]]
            if not f.get("more"):
                self.snapshots += 1
                self.repeated += [("snapshot", u) for u in set(self.paging)
                                  if self.paging.count(u) > 1]  # fmt: skip
                self.members = set(self.paging)
        elif kind == "presence.diff":
            joined = [m["user"] for m in f["joined"]]
            self.repeated += [("diff", u) for u in set(joined) if joined.count(u) > 1]
            self.members -= {m["user"] for m in f["left"]}
            self.members |= set(joined)
        elif kind == "presence.join":
            self.members.add(f["user"])
        elif kind == "presence.leave":
            self.members.discard(f["user"])

    def retry(self) -> None:
        if self.client.open:
            asyncio.ensure_future(self.client.send(type="join", room=ROOM))


async def test_a_join_storm_through_a_redis_stall_converges(redis_server, db, servers, store):
    users = list(db.users([f"fan{i}" for i in range(N)]).values())
    a, b = await servers.astart(name="a"), await servers.astart(name="b")
    gate = asyncio.Semaphore(20)

    async def connect(i: int, user: Any) -> Client:
        async with gate:
            client = await Client(a if i % 2 else b, user).connect(timeout=limit(10))
        client.beat(TIMERS["HEARTBEAT_INTERVAL"])
        if i % 3:  # two in three take their changes batched, as presence.js does
            await client.send(type="hello", accept=["presence.diff"])
        return client

    clients = list(await asyncio.gather(*(connect(i, u) for i, u in enumerate(users))))
    rosters = [Roster(c) for c in clients]
    everybody = {c.id for c in clients}
    assert len(everybody) == N

    async def join(i: int, client: Client) -> None:
        await asyncio.sleep(SPREAD * i / N)
        await client.send(type="join", room=ROOM)

    storm = asyncio.gather(*(join(i, c) for i, c in enumerate(clients)))
    await asyncio.sleep(SPREAD / 3)  # a third of the joins asked: Redis stops
    pid = redis_server.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(STALL)  # the stall itself, not a wait for an outcome
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    await storm

    def converged() -> bool:
        truth = set(store.room_members(ROOM))
        return truth == everybody and all(r.members == truth for r in rosters)

    def detail() -> Any:
        truth = set(store.room_members(ROOM))
        wrong = [
            (r.client.name, sorted(truth - r.members)[:3], sorted(r.members - truth)[:3])
            for r in rosters
            if r.members != truth
        ]
        return {"missing from the room": sorted(everybody - truth), "wrong rosters": wrong[:8],
                "of": len(wrong)}  # fmt: skip

    await eventually(converged, limit(SETTLE), "every roster the room's membership", detail=detail)
    took = time.monotonic() - resumed
    print(said("every roster whole after the stall", took, SETTLE))
    refused = sum(r.retries for r in rosters)
    print(f"joins refused and asked again: {refused}")
    assert refused > 0  # the stall met the storm: some joins timed out (their fate unknown)
    assert [r.repeated for r in rosters if r.repeated] == []  # nobody listed twice
    assert [c.name for c in clients if not c.open] == []  # no socket lost
    for server in (a, b):
        assert server.tracebacks() == 0, server.log()
    await close_all(clients)
