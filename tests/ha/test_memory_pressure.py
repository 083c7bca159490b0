"""Redis full: at ``maxmemory`` with ``noeviction`` (writes refused) and with an eviction policy
(keys vanish), under a real server with sockets in rooms. Pages keep serving, sockets stay open
and are told (an ``unavailable`` error frame), and once memory is free again everybody is back
and the key space is whole (tests/ha/layout.py). System check W005 warns of eviction policies."""

from __future__ import annotations

import asyncio

import pytest
import redis
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from presence_app.testing import RedisServer
from tests.reliability.clients import close_all, connect_all
from tests.reliability.conftest import eventually, servers_store, store_config
from tests.reliability.settings import TIMERS
from tests.timing import limit, said

from .layout import layout_problems

pytestmark = pytest.mark.timeout(120)

USERS = 20
ROOMS = ("lobby", "kitchen")
FILLER = 8 * 1024  # bytes per filler value
#: The servers' timers (tests/server_settings.py): a heartbeat interval and a flush, and the
#: rooms' re-joins (as long again as a lease).
HEAL = TIMERS["HEARTBEAT_INTERVAL"] + TIMERS["HEARTBEAT_FLUSH_INTERVAL"] + TIMERS["LEASE_TTL"]
LEASE_TTL = TIMERS["LEASE_TTL"]
SWEEP_INTERVAL = TIMERS["SWEEP_INTERVAL"]


def fill(client: redis.Redis, budget: int) -> int:
    """Writes filler keys (not presence's) until Redis refuses one or ``budget`` bytes went
    in; returns how many keys it wrote."""
    written = 0
    while written * FILLER < budget:
        pipe = client.pipeline(transaction=False)
        for i in range(written, written + 64):
            pipe.set(f"filler:{i}", b"x" * FILLER)
        replies = pipe.execute(raise_on_error=False)
        if any(isinstance(r, redis.OutOfMemoryError) for r in replies):
            return written + sum(r is True for r in replies)
        written += 64
    return written


def unfill(client: redis.Redis) -> None:
    for key in client.scan_iter(match="filler:*", count=1000):
        client.unlink(key)


@pytest.mark.parametrize("policy", ["noeviction", "allkeys-random"])
async def test_redis_at_maxmemory(redis_server, db, servers_on, prefix, policy):
    store_client = redis.Redis.from_url(redis_server.url, socket_timeout=5)
    store = servers_store(store_client, store_config(prefix))
    people = db.users([f"mem{i}" for i in range(USERS)] + ["late"])
    late_user = people.pop("late")
    server = await servers_on(db).astart()
    clients = await connect_all(server, people.values())
    members: dict[str, set[str]] = {room: set() for room in ROOMS}
    for i, client in enumerate(clients):
        client.beat(1.0)
        await client.join(ROOMS[i % 2])
        members[ROOMS[i % 2]].add(client.id)
    everybody = {c.id for c in clients}

    def all_present() -> bool:
        return set(store.online()) == everybody and all(
            set(store.room_members(r)) == m for r, m in members.items()
        )

    await eventually(all_present, 10, "everybody in their rooms")
    for client in clients:
        client.drain()

    # -- Redis full --------------------------------------------------------------------------
    used = int(store_client.info("memory")["used_memory"])
    store_client.config_set("maxmemory-policy", policy)
    store_client.config_set("maxmemory", used + 2 * 1024 * 1024)
    written = await asyncio.to_thread(fill, store_client, 16 * 1024 * 1024)
    if policy == "noeviction":
        # Filled up to the limit. Client buffers count in used_memory and shrink afterwards
        # (query buffers in Redis' cron; the servers' pub/sub output buffers, large while a
        # loaded server is slow to read them): a limit just under the use let heartbeats
        # through for 10 s in `make soak`'s first run. Pin the limit at half of what is used,
        # so every write is refused.
        used = int(store_client.info("memory")["used_memory"])
        store_client.config_set("maxmemory", used // 2)
    evicted = int(store_client.info("stats")["evicted_keys"])
    print(f"{policy}: {written} filler keys written, {evicted} keys evicted")
    if policy == "noeviction":
        # Writes are refused: every socket's heartbeats fail, and each is told.
        await asyncio.gather(
            *(c.wait_for("error", timeout=10, code="unavailable") for c in clients)
        )
        reply = await clients[0].reply(type="join", room="garden")
        assert [f["code"] for f in reply if f["type"] == "error"] == ["unavailable"], reply
        await asyncio.sleep(LEASE_TTL + 1)  # outlast every lease: the sweep is refused too
    else:
        assert evicted > 0
        # Keep the pressure on for a few heartbeats: leases, rooms and indexes get evicted
        # (each heartbeat that finds its lease gone takes it again).
        for _ in range(3):
            await asyncio.to_thread(fill, store_client, 4 * 1024 * 1024)
            await asyncio.sleep(1)
    for path in ("/", "/rooms/lobby/"):
        status, body = await asyncio.to_thread(server.get, path, clients[0].user)
        assert status == 200, (path, body[:300])
    api = (await asyncio.to_thread(server.get, "/presence/api/online/", clients[0].user))[0]
    assert api in (200, 503)
    late = await connect_all(server, [late_user])  # a socket opened meanwhile
    assert all(c.open for c in clients)

    # -- memory free again -----------------------------------------------------------------------
    store_client.config_set("maxmemory", 0)
    store_client.config_set("maxmemory-policy", "noeviction")
    await asyncio.to_thread(unfill, store_client)

    def missing() -> dict:
        return {
            "online": sorted(everybody - set(store.online())),
            **{r: sorted(m - set(store.room_members(r))) for r, m in members.items()},
        }

    if policy == "noeviction":
        # Nothing was lost, only refused: everybody back in their rooms, the key space whole.
        healed = await eventually(
            lambda: all_present() or None, limit(HEAL), "everybody back", detail=missing
        )
        # The counts the refused writes left behind are the sweeper's to mend.
        await eventually(
            lambda: layout_problems(store) == [],
            limit(2 * SWEEP_INTERVAL),
            "the key space whole",
            detail=lambda: layout_problems(store),
        )
    else:
        # Evicted leases are taken again by the next heartbeat, and so are live leases whose
        # user's index was evicted (the heartbeat reports them): everybody online again. But a
        # room set or a user's room list evicted under a live lease is not noticed (the lease
        # is there): those memberships stay lost until the socket joins again. That is why
        # check W005 warns of eviction policies. Every key left still fits the layout.
        healed = await eventually(
            lambda: everybody <= set(store.online()) or None,
            limit(HEAL),
            "everybody online again",
            detail=missing,
        )

        def misfits() -> list[str]:
            return [p for p in layout_problems(store) if "no layout rule" in p or ", not a " in p]

        await eventually(
            lambda: misfits() == [], limit(2 * SWEEP_INTERVAL), "every key fits", detail=misfits
        )
        problems = layout_problems(store)
        lost = {room: names for room, names in missing().items() if room != "online"}
        print(f"{policy}: room memberships lost to eviction {lost}, count disagreements {problems}")
    print(said(f"{policy}: healed after memory was freed", healed, HEAL))
    assert all(c.open for c in clients)
    await close_all([*clients, *late])
    log = server.log(None)
    # Under eviction a socket re-taking its evicted lease may see it evicted again before its
    # joins (UnknownConnection in the consumer's recovery; the next heartbeat retries). The
    # consumer logs that as an error today: counted here, anything else fails.
    raced = log.count("UnknownConnection: the connection holds no lease")
    print(
        f"{policy}: {server.tracebacks()} tracebacks, {raced} of them a lease evicted "
        "between the consumer's connect and join"
    )
    assert server.tracebacks() == (raced if policy != "noeviction" else 0), log[-6000:]
    store_client.close()


def _ids(url: str) -> list[str]:
    with override_settings(PRESENCE={**settings.PRESENCE, "REDIS_URL": url}):
        return sorted(
            {
                m.id
                for m in run_checks(include_deployment_checks=False)
                if m.id.startswith("presence_app.")
            }
        )


@pytest.mark.parametrize(
    "maxmemory, policy, warned",
    [
        ("0", "noeviction", False),
        ("64mb", "noeviction", False),
        ("0", "allkeys-lru", False),  # no limit: nothing is ever evicted
        ("64mb", "allkeys-lru", True),
        ("64mb", "volatile-ttl", True),  # presence's user keys carry a TTL
    ],
)
def test_check_warns_when_the_eviction_policy_can_evict_presence_keys(maxmemory, policy, warned):
    with RedisServer(extra=["--maxmemory", maxmemory, "--maxmemory-policy", policy]) as server:
        assert ("presence_app.W005" in _ids(server.url)) is warned
