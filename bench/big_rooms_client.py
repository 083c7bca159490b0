"""Benchmark 17's load client: ``python -m bench.big_rooms_client CONFIG.json``, one of several
processes, each holding its share of the sockets (spread over the servers, one user each, the
session cookie and the server's Origin, as a browser sends them; each says ``hello`` accepting
``presence.diff``, as presence.js does, and heartbeats as presence.js does).

It prints ``ready`` once its sockets are open, then reads commands on stdin, one JSON line each,
and answers each with one JSON line:

- ``{"phase": "storm", "room", "start_at", "spread", "settle", "n"}``: the socket of global index
  ``g`` joins ``room`` at ``start_at + spread * g / n``; every socket keeps the room's roster as
  a browser does (its snapshot's pages, then each diff) and counts its membership frames, until
  every roster holds the ``n`` members or ``settle`` seconds after the last join. Per socket:
  membership frames and bytes since ``start_at``, when its snapshot ended, when its roster
  became the whole room, whether it ends equal to it.
- ``{"phase": "states", "room", "start_at", "seconds", "senders", "hz"}``: the sockets of global
  index below ``senders`` send a room state (``{"t": wall clock}``) ``hz`` times a second; every
  socket counts its ``presence.roomstate`` frames and bytes, and one socket in
  :data:`SAMPLE` reads them for the delivery latency of every state in them (one host, one
  clock).
- ``{"phase": "count", "room", "start_at", "spread", "seconds", "churners", "rate"}``: every
  socket joins a count-only room (spread), waits until ``start_at``; then for ``seconds`` the
  sockets of global index below ``churners`` leave and join again, ``rate`` changes a second
  in all; every socket counts the frames and bytes it gets meanwhile (the churners apart).
- ``{"phase": "quit"}``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

#: One socket in SAMPLE parses its room states for the latency (the others count them).
SAMPLE = 10


@dataclass
class Sock:
    ws: ClientConnection
    g: int  # global index
    user: str = ""
    room: str = ""
    roster: set[str] = field(default_factory=set)
    frames: int = 0
    bytes: int = 0
    first_at: float = 0.0
    last_at: float = 0.0
    snapshot_at: float | None = None
    full_at: float | None = None
    counted: asyncio.Future[None] | None = None
    latencies: list[float] = field(default_factory=list)
    kind: str = ""  # what is counted now: "storm", "states", "count"


class Lag:
    """How late this process's event loop wakes a 20 ms sleep: a loop that lags delays every
    frame it reads (the latency it measures is then its own, not the servers')."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.cpu0 = 0.0

    def start(self) -> None:
        self.samples = []
        self.cpu0 = time.process_time()

    def result(self) -> dict[str, Any]:
        lags = sorted(self.samples) or [0.0]
        return {
            "cpu_s": time.process_time() - self.cpu0,
            "lag_p50": lags[len(lags) // 2],
            "lag_p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
            "lag_max": lags[-1],
        }

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.02)
            self.samples.append(loop.time() - t - 0.02)


class Client:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.lag = Lag()
        #: a probe holds a few sockets and reads every room state (its loop idles: what it
        #: measures is the servers' delay, not a busy client's)
        self.probe = bool(config.get("probe"))
        self.socks: list[Sock] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.n = 0
        self.full: asyncio.Event = asyncio.Event()
        self.missing = 0
        self.retries = 0  # joins Redis refused and that were asked again

    async def open(self, cookie: str, g: int) -> Sock:
        servers = self.config["servers"]
        ws = await connect(
            servers[g % len(servers)],
            origin=self.config["origin"][g % len(servers)],
            additional_headers={"Cookie": cookie},
            ping_interval=None,
            open_timeout=120,
            max_queue=None,
        )
        sock = Sock(ws, g)
        hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
        sock.user = hello["user"]
        await ws.send(json.dumps({"type": "hello", "accept": ["presence.diff"]}))
        self.tasks.append(asyncio.create_task(self.read(sock)))
        return sock

    async def read(self, sock: Sock) -> None:
        try:
            async for text in sock.ws:
                self.frame(sock, text)
        except Exception:  # noqa: BLE001 - closed: the counts say so
            pass

    def frame(self, sock: Sock, text: str | bytes) -> None:
        kind = sock.kind
        if kind in ("storm", "count") and '"unavailable"' in text:
            # Redis refused the join (a timeout): asked again a second later, as presence.js does
            f = json.loads(text)
            if (
                f.get("type") == "error"
                and f.get("code") == "unavailable"
                and f.get("frame") == "join"
            ):
                self.retries += 1
                again = {"type": "join", "room": f.get("room")}
                asyncio.get_running_loop().call_later(
                    1.0, lambda: self.tasks.append(asyncio.create_task(send(sock, again)))
                )
            return
        if kind == "states":
            if '"presence.roomstate"' not in text:
                return
            now = time.time()
            sock.frames += 1
            sock.bytes += len(text)
            if self.probe or sock.g % SAMPLE == 0:
                for st in json.loads(text)["states"]:
                    if st.get("data"):
                        sock.latencies.append(now - st["data"]["t"])
            return
        if kind == "count":
            if '"presence.count"' in text:
                sock.frames += 1
                sock.bytes += len(text)
                if sock.counted is not None and not sock.counted.done():
                    sock.counted.set_result(None)
            return
        if kind != "storm":
            return
        frame = json.loads(text)
        t = frame.get("type")
        if frame.get("room") != sock.room:
            return
        if t == "presence.state":
            if not frame.get("page"):
                sock.roster = set()
            sock.roster |= {m["user"] for m in frame["members"]}
            if not frame.get("more"):
                sock.snapshot_at = time.time()
        elif t == "presence.diff":
            now = time.time()
            sock.frames += 1
            sock.bytes += len(text)
            sock.first_at = sock.first_at or now
            sock.last_at = now
            sock.roster -= {m["user"] for m in frame["left"]}
            sock.roster |= {m["user"] for m in frame["joined"]}
        else:
            return
        if sock.full_at is None and len(sock.roster) >= self.n:
            sock.full_at = time.time()
            self.missing -= 1
            if self.missing <= 0:
                self.full.set()

    async def beat(self) -> None:
        """A heartbeat a socket every ``beat_every`` seconds, spread, as presence.js beats."""
        every, chunks = float(self.config.get("beat_every", 10)), 20
        while True:
            # A round every ``every`` seconds on the clock, in chunks: a busy loop (thousands of
            # frames to parse) delays a chunk, never the round (a slept-per-socket round of
            # 2,500 stretched past LEASE_TTL under load, and the server closed them as silent).
            socks, start = list(self.socks), time.monotonic()  # those open so far
            for c in range(chunks):
                for sock in socks[c::chunks]:
                    try:
                        await sock.ws.send('{"type": "heartbeat"}')
                    except Exception:  # noqa: BLE001 - closed: the counts say so
                        pass
                await asyncio.sleep(max(0.0, start + every * (c + 1) / chunks - time.monotonic()))

    # -- phases ---------------------------------------------------------------------------------
    async def storm(self, cmd: dict[str, Any]) -> dict[str, Any]:
        room, n = cmd["room"], int(cmd["n"])
        members = [s for s in self.socks if s.g < n]  # the others stay out of this room
        self.n, self.missing, self.full = n, len(members), asyncio.Event()
        for s in members:
            s.kind, s.room, s.roster = "storm", room, set()
            s.frames = s.bytes = 0
            s.first_at = s.last_at = 0.0
            s.snapshot_at = s.full_at = None
        start_at, spread = float(cmd["start_at"]), float(cmd["spread"])

        async def join(s: Sock) -> None:
            await asyncio.sleep(max(0.0, start_at + spread * s.g / n - time.time()))
            await send(s, {"type": "join", "room": room})

        await asyncio.gather(*(join(s) for s in members))
        deadline = start_at + spread + float(cmd["settle"])
        try:
            await asyncio.wait_for(self.full.wait(), max(1.0, deadline - time.time()))
        except TimeoutError:
            pass
        await asyncio.sleep(0.5)  # a frame on its way still counts against the rate
        for s in members:
            s.kind = ""
        return {
            "sockets": [
                [
                    s.frames,
                    s.bytes,
                    s.snapshot_at,
                    s.full_at,
                    s.first_at,
                    s.last_at,
                    sorted(s.roster),
                ]  # fmt: skip
                for s in members
            ],
            "users": [s.user for s in members],
            "closed": sum(1 for s in self.socks if s.ws.close_code is not None),
            "close_codes": dict(
                Counter(s.ws.close_code for s in self.socks if s.ws.close_code is not None)
            ),
        }

    async def states(self, cmd: dict[str, Any]) -> dict[str, Any]:
        members = [s for s in self.socks if s.g < int(cmd["n"])]
        for s in members:
            s.kind, s.frames, s.bytes, s.latencies = "states", 0, 0, []
        start_at, seconds, hz = float(cmd["start_at"]), float(cmd["seconds"]), float(cmd["hz"])
        room = cmd["room"]
        senders = [s for s in members if s.g < int(cmd["senders"])]

        async def sender(s: Sock) -> None:
            k = 0
            offset = (s.g % 7) / (7 * hz)  # senders spread over the tick, as people move
            while True:
                at = start_at + offset + k / hz
                if at >= start_at + seconds:
                    return
                await asyncio.sleep(max(0.0, at - time.time()))
                data = {"t": time.time(), "k": k}
                await send(s, {"type": "roomstate", "room": room, "data": data})
                k += 1

        await asyncio.gather(*(sender(s) for s in senders))
        await asyncio.sleep(max(0.0, start_at + seconds + 1.5 - time.time()))  # the drain
        for s in members:
            s.kind = ""
        return {
            "frames": sum(s.frames for s in members),
            "bytes": sum(s.bytes for s in members),
            "latencies": [x for s in members for x in s.latencies],
        }

    async def count(self, cmd: dict[str, Any]) -> dict[str, Any]:
        room = cmd["room"]
        start_at, spread, n = float(cmd["start_at"]), float(cmd["spread"]), int(cmd["n"])
        loop = asyncio.get_running_loop()
        for s in self.socks:
            s.kind, s.frames, s.bytes = "count", 0, 0
            s.counted = loop.create_future()

        async def join(s: Sock) -> None:
            await asyncio.sleep(max(0.0, start_at - spread - 5 + spread * s.g / n - time.time()))
            await send(s, {"type": "join", "room": room})

        await asyncio.gather(*(join(s) for s in self.socks))
        try:
            await asyncio.wait_for(
                asyncio.gather(*(s.counted for s in self.socks)),  # type: ignore[misc]
                max(1.0, start_at - time.time()),
            )
            joined = True
        except TimeoutError:
            joined = False
        await asyncio.sleep(max(0.0, start_at - time.time()))
        for s in self.socks:
            s.frames = s.bytes = 0
        seconds, rate = float(cmd["seconds"]), float(cmd["rate"])
        churners = [s for s in self.socks if s.g < int(cmd["churners"])]
        total = int(cmd["churners"])
        changes = 0

        async def churn(s: Sock) -> None:
            nonlocal changes
            # each churner leaves and joins again, its turns spread so that all make ``rate``
            period = 2 * total / rate
            k = 0
            while True:
                at = start_at + (s.g / total) * period + k * period / 2
                if at >= start_at + seconds:
                    return
                await asyncio.sleep(max(0.0, at - time.time()))
                kind = "leave" if k % 2 == 0 else "join"
                await send(s, {"type": kind, "room": room})
                changes += 1
                k += 1

        await asyncio.gather(*(churn(s) for s in churners))
        await asyncio.sleep(max(0.0, start_at + seconds - time.time()))
        others = [s for s in self.socks if s.g >= int(cmd["churners"])]
        for s in self.socks:
            s.kind = ""
        return {
            "joined": joined,
            "changes": changes,
            "others": len(others),
            "frames": sum(s.frames for s in others),
            "bytes": sum(s.bytes for s in others),
        }


async def send(sock: Sock, frame: dict[str, Any]) -> None:
    try:
        await sock.ws.send(json.dumps(frame))
    except Exception:  # noqa: BLE001 - closed: its roster and counts say so
        pass


async def main(path: str) -> None:
    config = json.loads(open(path).read())
    client = Client(config)
    gate = asyncio.Semaphore(int(config.get("connect_concurrency", 50)))

    async def one(cookie: str, g: int) -> None:
        async with gate:
            client.socks.append(await client.open(cookie, g))  # beating from now on

    client.tasks.append(asyncio.create_task(client.beat()))
    client.tasks.append(asyncio.create_task(client.lag.run()))
    pairs = zip(config["cookies"], config["globals"], strict=True)
    await asyncio.gather(*(one(c, g) for c, g in pairs))
    gc.collect()
    gc.freeze()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        if cmd["phase"] == "quit":
            break
        client.lag.start()
        client.retries = 0
        result = await getattr(client, cmd["phase"])(cmd)
        # its CPU, its loop's lag and the joins it asked again, this phase
        result["client"] = {**client.lag.result(), "join_retries": client.retries}
        print(json.dumps(result), flush=True)
    for task in client.tasks:
        task.cancel()
    await asyncio.gather(*(s.ws.close() for s in client.socks), return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
