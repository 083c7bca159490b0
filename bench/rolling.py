"""12. A rolling deploy: two uvicorn processes behind one address (the TCP front of
tests/reliability/rolling.py, a load balancer's part), 2,000 heartbeating WebSockets and 500 SSE
streams (quick: 200 and 50) spread over them, in rooms of 50; SIGTERM to one, started again,
then the other. The project as shipped (bench/ws_settings.py: the default timers, a 20 s grace), on
uvicorn with ``--timeout-graceful-shutdown 30``; the clients reconnect as presence.js does (a
socket at once, a stream after its 2 s ``retry:``, resuming with its ``Last-Event-ID``).

Measured: how long each process took to stop, beside its graceful timeout; how long until every
connection was back in its room through the front, beside the grace; what an observer on a third
process (in every room, watching up to ``MAX_WATCHED_USERS`` of them) heard of it: nothing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.reliability.clients import Client, close_all, connect_all
from tests.reliability.rolling import Front, Rollout
from tests.servers import AsgiServer, Database
from tests.sse_client import SseClient

from .common import Check, Context, Row, benchmark

ROOM_SIZE = 50  # a room's connections (the observer is in every room: at most 50 rooms)
GRACEFUL = 30
GRACE = 20.0  # DISCONNECT_GRACE, the project's default
HEARTBEAT = 30.0
RETRY = 2.0  # sse.RETRY_MS
SWEEP = 5.0
WATCH = 500  # MAX_WATCHED_USERS


async def _run(db: Database, names: list[str], users: dict[str, Any], n_ws: int) -> dict:
    room_of = {name: f"room{i // ROOM_SIZE}" for i, name in enumerate(names)}
    env = {"PRESENCE_KEY_PREFIX": "brolling"}
    a = AsgiServer(db, name="a", env=env, graceful=GRACEFUL)
    b = AsgiServer(db, name="b", env=env, graceful=GRACEFUL)
    watch = AsgiServer(db, name="watch", env=env)
    servers = [a, b, watch]
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start, 60) for s in servers))
        front = await Front([a, b]).start()
        observer = await Client(watch, users["observer"]).connect(timeout=60)
        observer.beat(HEARTBEAT)
        for room in sorted(set(room_of.values())):
            await observer.join(room, timeout=60)
        sockets = await connect_all(front, [users[n] for n in names[:n_ws]])  # type: ignore[arg-type]
        for client in sockets:
            client.beat(HEARTBEAT)
        gate = asyncio.Semaphore(50)

        async def joined(client: Client) -> None:
            async with gate:
                await client.join(room_of[client.name], timeout=60)

        await asyncio.gather(*(joined(c) for c in sockets))

        async def stream(name: str) -> SseClient:
            async with gate:
                s = await SseClient(front, users[name]).connect(timeout=60)  # type: ignore[arg-type]
                await s.join(room_of[name], timeout=60)
                return s

        streams = await asyncio.gather(*(stream(n) for n in names[n_ws:]))
        everybody = {users[n].id for n in names}
        await observer.send(type="watch", users=sorted(everybody)[:WATCH])
        await observer.wait_for("presence.state", timeout=60, watch=True)
        heard: list[dict] = []
        observer.drain()
        observer.listeners.append(
            lambda f: (
                heard.append(f)
                if f.get("user") in everybody
                and (
                    f["type"] in ("presence.join", "presence.leave") or f.get("state") == "offline"
                )
                else None
            )
        )
        rollout = Rollout(
            dict(zip(names, sockets, strict=False)),
            dict(zip(names[n_ws:], streams, strict=True)),
            room="",
            rooms=room_of,
            heartbeat=HEARTBEAT,
            retry=RETRY,
        )
        restarts = []
        try:
            for server in (a, b):
                restarts.append({"server": server.name, **await rollout.restart(server, 120)})
            await asyncio.sleep(GRACE + SWEEP + 2)  # the old leases' graces end, a sweep runs
        finally:
            await rollout.stop()
            await close_all([*sockets, observer])
            for s in streams:
                await s.close()
            await front.stop()
        tracebacks = sum(s.tracebacks() for s in servers)
        return {"restarts": restarts, "heard": len(heard), "tracebacks": tracebacks}
    finally:
        for s in servers:
            s.stop()


@benchmark("rolling", "12. A rolling deploy behind one address")
def run(ctx: Context) -> list[Row]:
    n_ws, n_sse = ctx.size(2000, 200), ctx.size(500, 50)
    folder = Path(tempfile.mkdtemp(prefix="bench-rolling-"))
    ctx.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    db = Database(
        folder / "db.sqlite3", settings="bench.ws_settings", env={"REDIS_URL": ctx.redis.url}
    ).migrate()
    names = [f"ws{i}" for i in range(n_ws)] + [f"sse{i}" for i in range(n_sse)]
    ctx.log(f"rolling: {len(names) + 1} users and sessions")
    users = db.users([*names, "observer"])
    result = asyncio.run(_run(db, names, users, n_ws))
    for r in result["restarts"]:
        ctx.log(
            f"  {r['server']}: stopped in {r['stopped_s']:.2f} s (exit {r['code']}); "
            f"{r['moved']} connections ({r['moved_streams']} streams) back {r['back_s']:.2f} s "
            f"after the SIGTERM"
        )
    ctx.log(f"  observer heard {result['heard']} leave/join/offline events")
    stop = max(r["stopped_s"] for r in result["restarts"])
    back = max(r["back_s"] for r in result["restarts"])
    total = f"{n_ws:,} sockets + {n_sse:,} streams"
    return [
        Row(
            bench="12 rolling",
            metric=f"uvicorn stop with {total} open (slowest of 2)",
            ours=stop,
            unit="s",
            baseline=GRACEFUL,
            baseline_label="--timeout-graceful-shutdown",
            checks=[
                Check("graceful timeout never reached", stop, "<=", GRACEFUL / 10),
                Check("no traceback", result["tracebacks"], "<=", 0),
            ],
            details=result,
        ),
        Row(
            bench="12 rolling",
            metric=f"every connection back after a SIGTERM, {total} (slowest of 2)",
            ours=back,
            unit="s",
            baseline=GRACE,
            baseline_label="DISCONNECT_GRACE",
            checks=[
                Check("within the grace", back, "<=", GRACE),
                Check("observer heard no leave, join or offline", result["heard"], "<=", 0),
            ],
        ),
    ]
