"""Benchmark 6's load client: ``python -m bench.ws_client CONFIG.json``, a separate process.

Holds up to ``sizes[-1]`` authenticated WebSockets (one user each, the session cookie and the
server's Origin, as a browser sends them) against one server, and at each size in ``sizes``:

1. reads the server's RSS (``/proc/PID/status``) once the sockets are open and quiet;
2. **acks**: for ``ack_seconds`` every socket heartbeats as fast as its acks come back (one
   frame in flight per socket): heartbeat frames acknowledged per second, and the CPU seconds
   the server and this client spent (which of the two was the bottleneck);
3. **delivery**: every socket heartbeats every ``beat_every`` seconds (phases spread), while a
   joiner enters and leaves a room of ``room_size`` members ``cycles`` times; each member's
   receipt of the joiner's ``presence.join`` is timed from the moment the join was sent (one
   clock: this process). Deliveries that never come within ``deliver_timeout`` are counted.

Prints one JSON line per size. The client's garbage collector runs between phases only, so that
its pauses are not measured as the server's. Bounded: every wait has a deadline, and the sockets
are closed at the end.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from .common import cpu_seconds, rss_bytes

ROOM = "bench-room"


@dataclass
class Sock:
    ws: ClientConnection
    user: str = ""
    acks: int = 0
    ack_waiter: asyncio.Future[None] | None = None
    # The joiner's presence.join / presence.leave as seen here: (kind, cycle) -> receipt time.
    seen: dict[tuple[str, int], float] = field(default_factory=dict)
    joined: asyncio.Future[None] | None = None


class Client:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.socks: list[Sock] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.joiner_user = ""
        self.cycle = -1
        self.clock = time.perf_counter

    # -- sockets --------------------------------------------------------------------------------
    async def open(self, cookie: str) -> Sock:
        ws = await connect(
            self.config["ws_url"],
            origin=self.config["origin"],
            additional_headers={"Cookie": cookie},
            ping_interval=None,  # the server pings; the client's own would only add load
            open_timeout=60,
            max_queue=None,
        )
        sock = Sock(ws)
        hello = json.loads(await asyncio.wait_for(ws.recv(), 30))
        if hello.get("type") != "hello":
            raise RuntimeError(f"expected hello, got {hello}")
        sock.user = hello["user"]
        self.tasks.append(asyncio.create_task(self.read(sock)))
        return sock

    async def read(self, sock: Sock) -> None:
        try:
            async for text in sock.ws:
                frame = json.loads(text)
                kind = frame["type"]
                if kind == "heartbeat.ack":
                    sock.acks += 1
                    waiter = sock.ack_waiter
                    if waiter is not None and not waiter.done():
                        waiter.set_result(None)
                elif kind in ("presence.join", "presence.leave"):
                    if frame.get("user") == self.joiner_user and frame.get("room") == ROOM:
                        sock.seen.setdefault((kind, self.cycle), self.clock())
                elif kind == "presence.state" and frame.get("room") == ROOM:
                    if sock.joined is not None and not sock.joined.done():
                        sock.joined.set_result(None)
        except Exception:  # the socket closed: the counts say so
            pass

    async def grow(self, cookies: list[str]) -> float:
        """Opens sockets until there are len(cookies); returns the seconds it took."""
        start = self.clock()
        gate = asyncio.Semaphore(int(self.config.get("connect_concurrency", 100)))

        async def one(cookie: str) -> Sock:
            async with gate:
                return await self.open(cookie)

        todo = cookies[len(self.socks) :]
        self.socks.extend(await asyncio.gather(*(one(c) for c in todo)))
        return self.clock() - start

    async def join_room(self, socks: list[Sock]) -> None:
        loop = asyncio.get_running_loop()
        for sock in socks:
            sock.joined = loop.create_future()
            await sock.ws.send(json.dumps({"type": "join", "room": ROOM}))
        await asyncio.wait_for(asyncio.gather(*(s.joined for s in socks)), 60)

    # -- phases ---------------------------------------------------------------------------------
    async def acks_phase(self, seconds: float) -> dict[str, Any]:
        """Every socket heartbeats with one frame in flight, for ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        counted = [0]

        async def pump(sock: Sock) -> None:
            while loop.time() < deadline:
                sock.ack_waiter = loop.create_future()
                await sock.ws.send('{"type": "heartbeat"}')
                try:
                    await asyncio.wait_for(sock.ack_waiter, max(0.01, deadline - loop.time()))
                except TimeoutError:
                    return
                if loop.time() <= deadline:
                    counted[0] += 1

        pid = self.config["server_pid"]
        before = [s.acks for s in self.socks]
        server_cpu, client_cpu, start = cpu_seconds(pid), time.process_time(), loop.time()
        await asyncio.gather(*(pump(s) for s in self.socks))
        wall = loop.time() - start
        return {
            "acks": counted[0],
            "acks_per_s": counted[0] / seconds,
            "wall_s": wall,
            "server_cpu_s": cpu_seconds(pid) - server_cpu,
            "client_cpu_s": time.process_time() - client_cpu,
            # Sockets that got no ack at all: not held, or starved.
            "silent_sockets": sum(
                1 for s, b in zip(self.socks, before, strict=True) if s.acks == b
            ),
        }

    async def delivery_phase(self, joiner: Sock, members: list[Sock]) -> dict[str, Any]:
        """The joiner enters and leaves the room ``cycles`` times while everybody heartbeats."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        beat_every = float(cfg["beat_every"])

        async def background(sock: Sock) -> None:
            await asyncio.sleep(random.uniform(0, beat_every))
            while not stop.is_set():
                await sock.ws.send('{"type": "heartbeat"}')
                await asyncio.sleep(beat_every)

        # The joiner beats too: a lease left to expire would make each join a reconnect.
        beats = [asyncio.create_task(background(s)) for s in [*self.socks, joiner]]
        self.joiner_user = joiner.user
        samples: list[float] = []
        bursts: list[tuple[float, float]] = []
        missing = 0
        timeout = float(cfg["deliver_timeout"])
        beat_acks = sum(s.acks for s in self.socks)
        try:
            await asyncio.sleep(min(beat_every, 2.0))  # the background load is under way
            for _ in range(int(cfg["cycles"])):
                self.cycle += 1  # numbered across phases: old receipts never match
                cycle = self.cycle
                for kind in ("join", "leave"):
                    event = ("presence." + kind, cycle)
                    sent, sent_at = self.clock(), time.time()
                    await joiner.ws.send(json.dumps({"type": kind, "room": ROOM}))
                    until = loop.time() + timeout
                    while loop.time() < until and not all(event in m.seen for m in members):
                        await asyncio.sleep(0.002)
                    if kind == "join":
                        got = [m.seen[event] - sent for m in members if event in m.seen]
                        samples.extend(got)
                        missing += len(members) - len(got)
                        # Each join's deliveries are one burst: its slowest, and when it was.
                        slowest = max(got) * 1000 if got else None
                        bursts.append((round(sent_at, 3), slowest))
                await asyncio.sleep(float(cfg.get("cycle_pause", 0.05)))
        finally:
            stop.set()
            for task in beats:
                task.cancel()
            await asyncio.gather(*beats, return_exceptions=True)
        samples.sort()
        return {
            "deliveries": len(samples),
            "missing": missing,
            "latency_ms": [round(s * 1000, 3) for s in samples],
            # (wall-clock time of each join, its slowest delivery in ms; None: none came)
            "bursts": bursts,
            "background_acks": sum(s.acks for s in self.socks) - beat_acks,
        }

    async def close(self) -> None:
        await asyncio.gather(*(s.ws.close() for s in self.socks), return_exceptions=True)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def main(config: dict[str, Any]) -> None:
    # The client is the instrument: its own collector must not stall the loop that timestamps
    # the receipts (10,000 sockets are a million objects here too). It collects between
    # phases only.
    gc.disable()
    cookies: list[str] = config["cookies"]
    room_size = int(config["room_size"])
    pid = int(config["server_pid"])
    client = Client(config)
    try:
        # Warm the server's code paths with one socket; its RSS with none open is the base.
        warm = await client.open(config["joiner_cookie"])
        await warm.ws.close()
        await asyncio.sleep(1.0)
        base_rss = rss_bytes(pid)
        joiner = await client.open(config["joiner_cookie"])
        for size in config["sizes"]:
            connect_s = await client.grow(cookies[:size])
            if size == config["sizes"][0]:
                await client.join_room(client.socks[:room_size])
            gc.collect()
            await asyncio.sleep(float(config.get("settle", 2.0)))
            rss = rss_bytes(pid)
            out: dict[str, Any] = {
                "sockets": len(client.socks),
                "connect_s": connect_s,
                "base_rss": base_rss,
                "rss": rss,
                "rss_per_socket": (rss - base_rss) / len(client.socks),
            }
            out["ack"] = await client.acks_phase(float(config["ack_seconds"]))
            gc.collect()
            await asyncio.sleep(0.5)
            out["delivery"] = await client.delivery_phase(joiner, client.socks[:room_size])
            out["open_sockets"] = sum(1 for s in client.socks if s.ws.close_code is None)
            print(json.dumps(out), flush=True)
    finally:
        await client.close()


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
