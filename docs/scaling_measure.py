"""The per-operation figures docs/scaling.md's capacity model rests on, measured on this machine.

    .venv/bin/python docs/scaling_measure.py [--users 200000] [--sockets 1000]

1. Redis' own time per store operation (INFO commandstats, ``usec_per_call`` of EVALSHA and of
   the plain commands, reset before each operation), on a population of ``--users`` connected
   users in rooms of 16 (and one room of 1,000), through the public ``Store`` API.
2. Memory per extra connection, per room membership and per status message (``used_memory``
   growth over 100,000 of each, divided).
3. One ASGI process (``uvicorn project.asgi:application``, tests/scaleout/settings.py, the
   pub/sub channel layer): resident memory per open presence socket, and its CPU time per
   heartbeat frame and per event delivered to a socket (``/proc/PID/stat``), with ``--sockets``
   real WebSocket clients (with permessage-deflate, as browsers ask; ``--no-deflate``: without),
   each watching the first one (whose status changes are the events).

It starts its own redis-server and server process and stops them. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from presence_app.store import Store, StoreConfig  # noqa: E402
from presence_app.testing import RedisServer  # noqa: E402

T0 = 1_795_000_000.0


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def per_call(client: redis.Redis, fn, n: int, command: str = "evalsha") -> float:
    """Redis' microseconds per call of ``fn(i)`` (all its ``command`` calls: one per shard it
    touches), over ``n`` calls."""
    client.config_resetstat()
    for i in range(n):
        fn(i)
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return float(stats.get("usec", 0)) / n


def store_figures(url: str, users: int, shards: int = 1) -> dict:
    client = redis.Redis.from_url(url)
    client.flushall()
    store = Store(client, StoreConfig(shards=shards))
    rooms = users // 16
    t = T0
    for start in range(0, users, 1000):  # 1,000 connects + joins per round trip
        batch = range(start, min(users, start + 1000))
        store.gather(*(store.planned.connect(f"c{i}", f"u{i}", now=t) for i in batch))
        store.gather(
            *(store.planned.join(f"room{i % rooms}", f"c{i}", f"u{i}", now=t) for i in batch)
        )
    for i in range(1000):
        store.join("big", f"c{i}", f"u{i}", now=t)
    out: dict = {"population": users, "rooms": rooms, "shards": shards}
    n = 2000
    ids = [f"u{i}" for i in range(users)]
    out["connect_us"] = per_call(client, lambda i: store.connect(f"x{i}", f"u{i}", now=t), n)
    out["join_us"] = per_call(
        client, lambda i: store.join(f"room{i % rooms}", f"x{i}", f"u{i}", now=t), n
    )
    out["leave_us"] = per_call(
        client, lambda i: store.leave(f"room{i % rooms}", f"x{i}", f"u{i}", now=t), n
    )
    out["disconnect_us"] = per_call(client, lambda i: store.disconnect(f"x{i}", f"u{i}", now=t), n)
    out["touch_us"] = per_call(client, lambda i: store.touch(f"u{i}", now=t), n)
    out["activity_us"] = per_call(client, lambda i: store.activity(f"u{i}", now=t), n)
    out["set_status_us"] = per_call(
        client, lambda i: store.set_status(f"u{i}", "dnd", message="In a meeting", now=t), n
    )
    out["heartbeat_many_1000_us"] = per_call(
        client,
        lambda i: store.heartbeat_many(
            [(f"c{j}", f"u{j}") for j in range((i * 1000) % users, (i * 1000) % users + 1000)],
            now=t + 1 + i,
        ),
        100,
    )
    out["get_many_50_us"] = per_call(client, lambda i: store.get_many(ids[i : i + 50], now=t), n)
    out["get_many_200_us"] = per_call(
        client, lambda i: store.get_many(ids[i : i + 200], now=t), 500
    )
    out["room_members_16_us"] = per_call(client, lambda i: store.room_members(f"room{i}", now=t), n)
    out["room_members_1000_us"] = per_call(client, lambda i: store.room_members("big", now=t), 200)
    out["online_count_us"] = per_call(client, lambda i: store.online_count(now=t), n)
    out["online_100_us"] = per_call(client, lambda i: store.online(limit=100, now=t), n)
    # a join's snapshot, as the consumer reads it: room_members + get_many of the members
    client.config_resetstat()
    for i in range(n):
        store.get_many(store.room_members(f"room{i}", now=t), now=t)
    stats = client.info("commandstats")["cmdstat_evalsha"]
    out["join_snapshot_16_us"] = float(stats["usec"]) / n  # both calls, per snapshot
    # the sweep: expire 10,000 users' only leases, sweep, per eviction
    victims = [(f"c{i}", f"u{i}") for i in range(users - 10_000, users)]
    for i in range(0, len(victims), 1000):
        store.gather(*(store.planned.disconnect(c, u, now=t) for c, u in victims[i : i + 1000]))
    client.config_resetstat()
    started = time.perf_counter()
    evicted = store.sweep(now=t + 25)  # past the 20 s grace, within the 90 s lease
    wall = time.perf_counter() - started
    stats = client.info("commandstats")["cmdstat_evalsha"]
    offline = sum(1 for tr in evicted if tr.kind == "offline")
    out["sweep_evictions"] = offline
    out["sweep_us_per_eviction_redis"] = float(stats["usec"]) / max(1, offline)
    out["sweep_us_per_eviction_wall"] = wall * 1e6 / max(1, offline)

    # memory per extra connection, per room membership, per status message
    k = 100_000
    before = used(client)
    for start in range(0, k, 1000):
        store.gather(
            *(store.planned.connect(f"y{i}", f"u{i}", now=t) for i in range(start, start + 1000))
        )
    out["bytes_per_extra_connection"] = (used(client) - before) / k
    before = used(client)
    for start in range(0, k, 1000):
        store.gather(
            *(
                store.planned.join(f"mroom{i % (k // 16)}", f"y{i}", f"u{i}", now=t)
                for i in range(start, start + 1000)
            )
        )
    out["bytes_per_room_membership"] = (used(client) - before) / k
    before = used(client)
    for start in range(0, k, 1000):
        store.gather(
            *(
                store.planned.set_status(f"u{i}", None, message="Back at 3", emoji="🍕", now=t)
                for i in range(start, start + 1000)
            )
        )
    out["bytes_per_status_message"] = (used(client) - before) / k
    client.close()
    return out


# -- one ASGI process ----------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def asgi_figures(url: str, sockets: int, deflate: bool = True) -> dict:
    from websockets.asyncio.client import connect

    from tests.servers import AsgiServer, Database

    os.environ["REDIS_URL"] = url
    tmp = Path(tempfile.mkdtemp(prefix="presence-scaling-"))
    db = Database(
        tmp / "db.sqlite3",
        settings="tests.scaleout.settings",
        env={"REDIS_URL": url, "SCALEOUT_PREFIX": "scaling"},
    ).migrate()
    users = db.users([f"user{i}" for i in range(sockets)])
    server = AsgiServer(
        db, env={"SCALEOUT_LAYER": os.environ.get("SCALING_LAYER", "pubsub")}, name="scaling"
    ).start()
    out: dict = {"sockets": sockets, "permessage_deflate": deflate}
    try:
        pid = server.pid
        base_rss = rss_bytes(pid)
        conns = []
        for user in users.values():
            conns.append(
                await connect(
                    server.ws_url,
                    origin=server.origin,
                    max_queue=None,
                    compression="deflate" if deflate else None,
                    additional_headers={"Cookie": user.cookie},
                )
            )
            await conns[-1].recv()  # hello
        first = next(iter(users.values())).id
        for conn in conns[1:]:
            await conn.send(json.dumps({"type": "watch", "users": [first]}))
        await asyncio.sleep(3)
        for conn in conns:  # drain the join snapshots and events
            while True:
                try:
                    await asyncio.wait_for(conn.recv(), 0.001)
                except TimeoutError:
                    break
        out["rss_bytes_per_socket"] = (rss_bytes(pid) - base_rss) / sockets

        # heartbeat frames: each socket sends 10
        cpu0 = cpu_seconds(pid)
        for _ in range(10):
            for conn in conns:
                await conn.send('{"type": "heartbeat"}')
            await asyncio.sleep(0.3)
        await asyncio.sleep(1)
        out["server_cpu_us_per_heartbeat_frame"] = (cpu_seconds(pid) - cpu0) * 1e6 / (10 * sockets)

        # events delivered: status changes of the first user, each to every other socket
        # (its watchers); one change every 0.12 s keeps it under MAX_FRAMES_PER_SECOND
        counts = [0] * len(conns)

        async def drain(index, conn, expect):
            while counts[index] < expect:
                frame = json.loads(await conn.recv())
                if frame["type"] == "presence.update" and not frame.get("self"):
                    counts[index] += 1

        cpu0 = cpu_seconds(pid)
        changes = 20
        readers = [asyncio.ensure_future(drain(i, c, changes)) for i, c in enumerate(conns) if i]
        for i in range(changes):  # (the server's test timers: a lease lasts 3 s without beats)
            await conns[0].send('{"type": "heartbeat"}')
            await conns[0].send(json.dumps({"type": "status", "message": f"m{i}"}))
            await asyncio.sleep(0.12)
        await asyncio.wait(readers, timeout=30)
        for reader in readers:
            reader.cancel()
        deliveries = sum(counts)
        errors = []
        while True:
            try:
                frame = json.loads(await asyncio.wait_for(conns[0].recv(), 0.01))
            except TimeoutError:
                break
            if frame["type"] == "error":
                errors.append(frame)
        out["sender_errors"] = errors[:5]
        out["events_delivered"] = deliveries
        out["events_expected"] = changes * (sockets - 1)
        cpu = cpu_seconds(pid) - cpu0
        out["server_cpu_us_per_event_delivered"] = cpu * 1e6 / max(1, deliveries)
        for conn in conns:
            await conn.close()
    finally:
        server.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="SHARDS of the store (Redis' time is summed over every shard's call)",
    )
    parser.add_argument("--sockets", type=int, default=1000)
    parser.add_argument(
        "--no-deflate",
        action="store_true",
        help="clients without permessage-deflate (browsers ask for it)",
    )
    args = parser.parse_args()
    with RedisServer() as server:
        figures = {"store": {}}
        if args.users:
            figures["store"] = store_figures(server.url, args.users, args.shards)
        print(json.dumps(figures["store"], indent=2), file=sys.stderr, flush=True)
        server.restart()
        if args.sockets:
            figures["asgi"] = asyncio.run(
                asgi_figures(server.url, args.sockets, not args.no_deflate)
            )
        figures["redis_version"] = redis.Redis.from_url(server.url).info("server")["redis_version"]
    figures["loadavg"] = os.getloadavg()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
