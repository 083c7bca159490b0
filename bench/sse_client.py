"""Benchmark 11's load client: ``python -m bench.sse_client CONFIG.json``, a separate process.

Holds up to ``sizes[-1]`` presence connections of one ``transport`` against one server: SSE
streams (``GET /presence/sse/``, raw HTTP/1.1 on asyncio, joined to rooms by REST POSTs, as
presence.js does without WebSockets) or WebSockets (``/ws/presence/``, heartbeating every
``beat_every`` seconds as presence.js does; a stream's lease is kept by the stream itself). At
each size:

1. the server's RSS once the connections are open and quiet, per connection;
2. **delivery**: a WebSocket joiner enters and leaves a room of ``room_size`` members
   ``cycles`` times; each member's receipt of its ``presence.join`` is timed from the moment
   the join was sent (one clock: this process). Deliveries that never come within
   ``deliver_timeout`` are counted.

Prints one JSON line per size. The garbage collector runs between phases only.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import secrets
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidMessage

from .common import rss_bytes

ROOM = "bench-room"


async def sse_blocks(reader: asyncio.StreamReader, chunked: bool) -> AsyncIterator[list[bytes]]:
    """The events of an SSE response's body (chunked or not), each as its lines, until it ends."""
    buffer = b""
    while True:
        if chunked:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                return
            buffer += (await reader.readexactly(size + 2))[:-2]
        else:
            data = await reader.read(65536)
            if not data:
                return
            buffer += data
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            yield block.split(b"\n")


class Conn:
    """One member: its receipts of the joiner's events, (kind, cycle) -> time."""

    def __init__(self) -> None:
        self.user = ""
        self.stream = ""
        self.seen: dict[tuple[str, int], float] = {}
        self.joined: asyncio.Future[None] | None = None
        self.alive = True
        self.ws: Any = None
        self.writer: asyncio.StreamWriter | None = None


class Load:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.host, self.port = config["host"], int(config["port"])
        self.conns: list[Conn] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.joiner_user = ""
        self.cycle = -1
        self.retries = 0
        self.clock = time.perf_counter

    # -- receiving ------------------------------------------------------------------------------
    def frame(self, conn: Conn, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind in ("presence.join", "presence.leave"):
            if frame.get("user") == self.joiner_user and frame.get("room") == ROOM:
                conn.seen.setdefault((kind, self.cycle), self.clock())
        elif kind == "presence.state" and frame.get("room") == ROOM:
            if conn.joined is not None and not conn.joined.done():
                conn.joined.set_result(None)

    # -- SSE ------------------------------------------------------------------------------------
    async def open_sse(self, cookie: str) -> Conn:
        conn = Conn()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        writer.write(
            (
                f"GET /presence/sse/ HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                f"Accept: text/event-stream\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        status = await asyncio.wait_for(reader.readline(), 60)
        if b" 200 " not in status:
            raise RuntimeError(f"stream refused: {status!r}")
        chunked = False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            chunked |= line.lower().startswith(b"transfer-encoding: chunked")
        conn.writer = writer
        hello: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.tasks.append(asyncio.create_task(self.read_sse(conn, reader, chunked, hello)))
        first = await asyncio.wait_for(hello, 60)
        conn.user, conn.stream = first["user"], first["stream"]
        conn.csrf = first["csrf"]  # type: ignore[attr-defined]
        conn.cookie = cookie  # type: ignore[attr-defined]
        return conn

    async def read_sse(
        self,
        conn: Conn,
        reader: asyncio.StreamReader,
        chunked: bool,
        hello: asyncio.Future[dict[str, Any]],
    ) -> None:
        try:
            async for lines in sse_blocks(reader, chunked):
                for line in lines:
                    if line.startswith(b"data:"):
                        frame = json.loads(line[5:])
                        if frame.get("type") == "hello" and not hello.done():
                            hello.set_result(frame)
                        self.frame(conn, frame)
        except Exception:  # the stream closed: the counts say so
            pass
        conn.alive = False

    async def post(self, conn: Conn, frame_type: str, body: dict[str, Any]) -> int:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        token = secrets.token_hex(16)
        writer.write(
            (
                f"POST /presence/api/stream/{frame_type}/ HTTP/1.1\r\nHost: {self.host}:{self.port}"
                f"\r\nConnection: close\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nOrigin: http://{self.host}:{self.port}\r\n"
                f"Cookie: {conn.cookie}; csrftoken={token}\r\nX-CSRFToken: {token}\r\n"  # type: ignore[attr-defined]
                f"X-Presence-Stream: {conn.stream}\r\n\r\n"
            ).encode()
            + data
        )
        status = int((await asyncio.wait_for(reader.readline(), 60)).split()[1])
        await reader.read()
        writer.close()
        return status

    # -- WebSocket ------------------------------------------------------------------------------
    async def open_ws(self, cookie: str) -> Conn:
        conn = Conn()
        conn.ws = await connect(
            f"ws://{self.host}:{self.port}/ws/presence/",
            origin=f"http://{self.host}:{self.port}",
            additional_headers={"Cookie": cookie},
            ping_interval=None,
            open_timeout=60,
            max_queue=None,
        )
        hello = json.loads(await asyncio.wait_for(conn.ws.recv(), 30))
        conn.user = hello["user"]
        self.tasks.append(asyncio.create_task(self.read_ws(conn)))
        self.tasks.append(asyncio.create_task(self.beat(conn)))
        return conn

    async def read_ws(self, conn: Conn) -> None:
        try:
            async for text in conn.ws:
                self.frame(conn, json.loads(text))
        except Exception:
            pass
        conn.alive = False

    async def beat(self, conn: Conn) -> None:
        every = float(self.config["beat_every"])
        await asyncio.sleep(every * (hash(conn) % 1000) / 1000)
        try:
            while conn.alive:
                await conn.ws.send('{"type": "heartbeat"}')
                await asyncio.sleep(every)
        except Exception:
            pass

    # -- phases ---------------------------------------------------------------------------------
    async def grow(self, cookies: list[str], transport: str) -> float:
        start = self.clock()
        gate = asyncio.Semaphore(50)
        opener = self.open_sse if transport == "sse" else self.open_ws

        async def one(cookie: str) -> Conn:
            # A handshake refused under load (daphne's 5 s handshake timeout on a busy
            # machine) is tried again, and counted: the figures say how many were.
            for attempt in range(3):
                async with gate:
                    try:
                        return await opener(cookie)
                    except (OSError, EOFError, RuntimeError, InvalidMessage, TimeoutError):
                        if attempt == 2:
                            raise
                        self.retries += 1
                await asyncio.sleep(1.0)
            raise AssertionError("unreachable")

        self.conns.extend(await asyncio.gather(*(one(c) for c in cookies[len(self.conns) :])))
        return self.clock() - start

    async def join_room(self, conns: list[Conn], transport: str) -> None:
        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(20)

        async def one(conn: Conn) -> None:
            conn.joined = loop.create_future()
            async with gate:
                if transport == "sse":
                    status = await self.post(conn, "join", {"room": ROOM})
                    if status != 200:
                        raise RuntimeError(f"join by REST answered {status}")
                else:
                    await conn.ws.send(json.dumps({"type": "join", "room": ROOM}))
            await asyncio.wait_for(conn.joined, 60)

        await asyncio.gather(*(one(c) for c in conns))

    async def delivery(self, joiner: Conn, members: list[Conn]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        self.joiner_user = joiner.user
        timeout = float(self.config["deliver_timeout"])
        samples: list[float] = []
        missing = 0
        for _ in range(int(self.config["cycles"])):
            self.cycle += 1
            for kind in ("join", "leave"):
                event = ("presence." + kind, self.cycle)
                sent = self.clock()
                await joiner.ws.send(json.dumps({"type": kind, "room": ROOM}))
                until = loop.time() + timeout
                while loop.time() < until and not all(event in m.seen for m in members):
                    await asyncio.sleep(0.002)
                if kind == "join":
                    got = [m.seen[event] - sent for m in members if event in m.seen]
                    samples.extend(got)
                    missing += len(members) - len(got)
            await asyncio.sleep(0.05)
        samples.sort()
        return {
            "deliveries": len(samples),
            "missing": missing,
            "latency_ms": [round(s * 1000, 3) for s in samples],
        }

    async def close(self) -> None:
        # Readers and heartbeats first: a heartbeat crossing the close is the client's race.
        for conn in self.conns:
            conn.alive = False
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for conn in self.conns:
            if conn.writer is not None:
                conn.writer.close()
            if conn.ws is not None:
                await conn.ws.close()


async def main(config: dict[str, Any]) -> None:
    gc.disable()
    transport = config["transport"]
    pid = int(config["server_pid"])
    load = Load(config)
    try:
        warm = await (load.open_sse if transport == "sse" else load.open_ws)(config["cookies"][0])
        if warm.writer is not None:
            warm.writer.close()
        else:
            warm.alive = False
            await warm.ws.close()
        await asyncio.sleep(1.0)
        base_rss = rss_bytes(pid)
        joiner = await load.open_ws(config["joiner_cookie"])
        for size in config["sizes"]:
            connect_s = await load.grow(config["cookies"][:size], transport)
            if size == config["sizes"][0]:
                await load.join_room(load.conns[: int(config["room_size"])], transport)
            gc.collect()
            await asyncio.sleep(float(config["settle"]))
            rss = rss_bytes(pid)
            out: dict[str, Any] = {
                "transport": transport,
                "connections": len(load.conns),
                "connect_s": connect_s,
                "rss_per_connection": (rss - base_rss) / len(load.conns),
                "connect_retries": load.retries,
            }
            out["delivery"] = await load.delivery(joiner, load.conns[: int(config["room_size"])])
            out["open"] = sum(1 for c in load.conns if c.alive)
            print(json.dumps(out), flush=True)
    finally:
        await load.close()


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
