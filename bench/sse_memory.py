"""What an SSE stream costs beside a WebSocket, in one run: ``python -m bench.sse_memory [N]``.

One uvicorn process (``--server daphne``: daphne; tests/servers.py, bench/ws_settings.py: the project as shipped) is started
per transport; a client in this process (bench/sse_client.py's ``Load``) opens one connection,
closes it (start-up and first-use costs), then opens ``N`` more (default 200): presence SSE
streams (``GET /presence/sse/``), then, on a fresh server, WebSockets (``/ws/presence/``). The
figure is the server's RSS growth over those ``N`` divided by ``N``, after the connections
settle; both are printed side by side with their ratio.

``--trace`` starts the servers under tracemalloc instead (bench/sse_memory_app.py: slower, and
its RSS is not a figure) and prints, per transport, the allocations the ``N`` connections kept,
grouped by source line (``--group traceback`` by the allocating stack): where the bytes go.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from presence_app.testing import RedisServer
from tests.servers import AsgiServer, Database

from .common import rss_bytes
from .sse_client import Load


async def measure(server: AsgiServer, transport: str, cookies: list[str], trace: Path | None):
    load = Load({"host": "127.0.0.1", "port": server.port, "beat_every": 10.0})
    opener = load.open_sse if transport == "sse" else load.open_ws
    warm = await opener(cookies[0])
    load.conns.append(warm)  # held: the per-connection figure is for the N after it
    await asyncio.sleep(1.0)

    async def snapshot(n: int) -> tracemalloc.Snapshot | None:
        if trace is None:
            return None
        os.kill(server.pid, signal.SIGUSR1)
        done = Path(f"{trace}.{n}.done")
        while not done.exists():
            await asyncio.sleep(0.1)
        return tracemalloc.Snapshot.load(f"{trace}.{n}")

    before = await snapshot(0)
    base, threads_before = rss_bytes(server.pid), threads(server.pid)
    gate = asyncio.Semaphore(20)

    async def one(cookie: str) -> Any:
        async with gate:
            return await opener(cookie)

    load.conns.extend(await asyncio.gather(*(one(c) for c in cookies[1:])))
    await asyncio.sleep(3.0)  # settle: hellos sent, first keep-alives written
    after = await snapshot(1)
    grown = rss_bytes(server.pid) - base
    thread_growth = threads(server.pid) - threads_before
    n = len(cookies) - 1
    open_ = sum(c.alive for c in load.conns)
    await load.close()
    return grown / n, open_, thread_growth, before, after


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int, group: str) -> None:
    stats = after.compare_to(before, group)
    total = sum(s.size_diff for s in stats)
    print(f"  tracemalloc: {total / n / 1024:.1f} KiB kept per connection; the top lines:")
    for stat in stats[:25]:
        if stat.size_diff <= 0:
            continue
        frames = stat.traceback.format()[-6:] if group == "traceback" else [str(stat.traceback[0])]
        print(f"  {stat.size_diff / n:>9.0f} B/conn {stat.count_diff / n:>6.1f} blocks/conn")
        for line in frames:
            print("      " + line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=200)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--group", default="lineno", choices=("lineno", "traceback", "filename"))
    parser.add_argument("--only", choices=("sse", "ws"))
    parser.add_argument("--server", default="uvicorn", choices=("uvicorn", "daphne"))
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-sse-memory-"))
    with RedisServer() as redis_server:
        db = Database(
            folder / "db.sqlite3",
            settings="bench.ws_settings",
            env={"REDIS_URL": redis_server.url},
        ).migrate()
        users = db.users([f"u{i}" for i in range(args.n + 1)])
        cookies = [u.cookie for u in users.values()]
        results = {}
        for transport in [args.only] if args.only else ["sse", "ws"]:
            env = {"PRESENCE_KEY_PREFIX": f"mem-{transport}"}
            trace = folder / f"snap-{transport}" if args.trace else None
            if trace is not None:
                env["SSE_MEMORY_SNAPSHOT"] = str(trace)
            server = AsgiServer(db, app="bench.sse_memory_app:application", name=transport, env=env)
            with server:
                started = time.monotonic()
                per, open_, thread_growth, before, after = asyncio.run(
                    measure(server, transport, cookies, trace)
                )
                results[transport] = per
                print(
                    f"{transport}: {args.n} connections, {open_ - 1} open after, "
                    f"{per / 1024:.1f} KiB RSS each, {thread_growth} more threads "
                    f"({time.monotonic() - started:.0f} s)"
                    + (" [under tracemalloc: not a figure]" if trace else "")
                )
                if before is not None and after is not None:
                    gc.collect()
                    report(before, after, args.n, args.group)
        if len(results) == 2:
            print(f"sse / ws: {results['sse'] / results['ws']:.2f}x")


if __name__ == "__main__":
    main()
