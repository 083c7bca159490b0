"""Slow Redis: 200 ms of latency on every request (a delaying proxy on loopback, its own
process, between the server and Redis) for a while, under hundreds of heartbeating sockets in
rooms. Measured in the server process: resident memory, threads, and the script calls Redis
receives. Asserted: the sockets stay open and keep their leases, heartbeats stay coalesced
(script calls a second far below the sockets' heartbeats), memory and threads stay flat (no
queue or task pile-up), and when the latency ends a join is fast again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from presence_app.testing import free_port
from tests.reliability.clients import Client, close_all, connect_all
from tests.reliability.conftest import eventually, servers_store, store_config
from tests.reliability.settings import LOADED
from tests.servers import ROOT
from tests.timing import limit, said

from .probes import CommandRate

LATENCY = 0.2
ROOMS = ("lobby", "kitchen", "garden", "attic")
#: The servers' timers: heartbeats every second, flushes every 0.2 s, and, as
#: tests/reliability/settings.py's LOADED, leases of 30 s (a heartbeat flushed late by the
#: latency must not lose its lease, and neither must one that a loaded server, behind 300
#: sockets' frames, handles seconds late: under 5 s some were closed as silent, 4408) and
#: Redis calls timed out after 30 s, not 2 (the 200 ms of latency are far below either).
OVERRIDES = {"HEARTBEAT_INTERVAL": 1, **LOADED, "DISCONNECT_GRACE": 1}
#: The promise of a join once the latency is gone: a few round trips on a fast Redis again
#: (5 latencies and a second: what a backlog left behind by the latency would exceed), held to
#: tests/timing.py's multiple of it.
RECOVERED = 5 * LATENCY + 1


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (kB) and Threads of a process, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "Threads"):
            out[name] = int(value.split()[0])
    return out


class LatencyProxy:
    def __init__(self, target: int, delay: float) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.ha.latency_proxy",
                str(self.port),
                str(target),
                str(delay),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout.readline().strip() == "ready"

    def slow(self, on: bool) -> None:
        os.kill(self.process.pid, signal.SIGUSR1 if on else signal.SIGUSR2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


async def timed_join(client: Client, room: str) -> float:
    start = time.monotonic()
    await client.join(room, timeout=30)
    return time.monotonic() - start


async def slow_redis(db, servers, redis_server, prefix, sockets: int, seconds: float) -> None:
    proxy = LatencyProxy(redis_server.port, LATENCY)
    try:
        db.extra_env["REDIS_URL"] = f"redis://127.0.0.1:{proxy.port}/0"
        env = {"PRESENCE_OVERRIDES": json.dumps(OVERRIDES)}
        people = db.users([f"slow{i}" for i in range(sockets)])
        server = await servers.astart(env=env)
        clients = await connect_all(server, people.values(), concurrency=100)
        for i, client in enumerate(clients):
            client.beat(OVERRIDES["HEARTBEAT_INTERVAL"])
            await client.join(ROOMS[i % len(ROOMS)], timeout=15)
        direct = redis.Redis.from_url(redis_server.url, socket_timeout=10)
        store = servers_store(direct, store_config(prefix, **OVERRIDES))
        ids = {c.id for c in clients}
        await eventually(lambda: set(store.online()) == ids, 15, "everybody online")
        await asyncio.sleep(2)
        before = proc_status(server.pid)
        fast_join = await timed_join(clients[0], "fast")

        with CommandRate(direct) as commands:
            proxy.slow(True)
            slow_join = await timed_join(clients[1], "slow")
            peak = dict(before)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                await asyncio.sleep(1)
                now = proc_status(server.pid)
                peak = {k: max(peak[k], now[k]) for k in peak}
                online = await asyncio.to_thread(store.online)
                assert set(online) == ids, "a lease ran out under the latency"
            during = proc_status(server.pid)
            proxy.slow(False)
        recovered_join = await timed_join(clients[2], "recovered")
        scripts = commands.calls.get("evalsha", 0) / (seconds + slow_join)
        beats = sockets / OVERRIDES["HEARTBEAT_INTERVAL"]
        print(
            f"slow Redis ({LATENCY * 1000:.0f} ms, {seconds:.0f} s, {sockets} sockets): a join "
            f"took {fast_join * 1000:.0f} ms before, {slow_join * 1000:.0f} ms during, "
            f"{recovered_join * 1000:.0f} ms after; {scripts:.1f} script calls/s for "
            f"{beats:.0f} heartbeats/s; server RSS {before['VmRSS'] / 1024:.0f} MB before, "
            f"peak {peak['VmRSS'] / 1024:.0f} MB, {during['VmRSS'] / 1024:.0f} MB at the "
            f"end; threads {before['Threads']} before, peak {peak['Threads']}"
        )
        assert slow_join >= LATENCY  # the latency was there
        assert all(c.open for c in clients)
        assert set(await asyncio.to_thread(store.online)) == ids
        # Coalesced: a flush per HEARTBEAT_FLUSH_INTERVAL (one call for all sockets), sweeps,
        # not one call per heartbeat.
        assert scripts < beats / 10
        # Nothing piles up: memory within 64 MB of where it was, threads within a few.
        assert peak["VmRSS"] - before["VmRSS"] < 64 * 1024
        assert peak["Threads"] <= before["Threads"] + 4
        print(said("a join after the latency", recovered_join, RECOVERED))
        assert recovered_join < limit(RECOVERED)
        await close_all(clients)
        direct.close()
        assert server.tracebacks() == 0, server.log()
    finally:
        proxy.stop()


@pytest.mark.timeout(240)
async def test_slow_redis(db, servers_on, redis_server, prefix):
    await slow_redis(db, servers_on(db), redis_server, prefix, 300, 10)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_slow_redis_30_s_under_1000_sockets(db, servers_on, redis_server, prefix):
    await slow_redis(db, servers_on(db), redis_server, prefix, 1000, 30)
