"""The soak's load client (bench/soak.py): ``python -m bench.soak_client CONFIG.json``, a separate
process holding many presence connections in one asyncio loop, lean enough for thousands.

Each *actor* is one user's browser tab on one transport, through the front's one address:

- ``ws``: a WebSocket (``/ws/presence/``) that heartbeats every ``heartbeat`` seconds and joins,
  leaves and sets its status by frames;
- ``sse``: a presence stream (``GET /presence/sse/``) that does the same by REST POSTs
  (``/presence/api/stream/<frame>/``), as presence.js does without WebSockets; its lease is kept
  by the stream itself.

For ``seconds`` every actor acts at random at a human pace (a mean gap of ``mean_gap`` seconds):
it joins and leaves rooms, changes its status and message, reconnects (a clean close, or a
dropped TCP connection, then back within a few seconds and into its rooms again, as presence.js
does; a stream resumes with its ``Last-Event-ID``), or goes away for longer than the grace and
comes back as a new visit. It records only what the server confirmed: a room once the socket's
``presence.state`` came back or the stream's POST answered 200.

Then the churn stops. The actors that ``stay`` (a fraction) stay connected; the others close.
Each stayer proves that the server has handled its frames (a heartbeat's ack comes after them;
a stream's POSTs were answered), and the client prints one JSON line: the truth (every stayer's
user id and rooms) and the counts. It keeps the stayers connected until it reads a line on
stdin, then closes them, prints a last line and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import random
import resource
import secrets
import sys
from collections import Counter
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from .sse_client import sse_blocks

STATES = ("online", "online", "dnd")
MESSAGES = ("", "lunch", "in a meeting", "🎧 focus", "back at 3", "Ünïcødé ✓")
#: Relative weights of the actions of a connected actor.
ACTIONS = {"join": 5, "leave": 4, "status": 3, "reconnect": 1, "drop": 1, "away": 1}
TIMEOUT = 60.0  # a confirmation that takes longer counts as a failure


class Actor:
    def __init__(self, load: Load, kind: str, cookie: str, rng: random.Random) -> None:
        self.load, self.kind, self.cookie, self.rng = load, kind, cookie, rng
        self.user = ""
        self.rooms: set[str] = set()
        self.open = False
        self.tasks: list[asyncio.Task[None]] = []
        # WebSocket
        self.ws: ClientConnection | None = None
        # the frame type and room a confirmation is awaited for, and its outcome ("ok" or the
        # error's code)
        self.waiter: tuple[str, str, asyncio.Future[str]] | None = None
        # SSE
        self.writer: asyncio.StreamWriter | None = None
        self.stream = ""
        self.csrf = ""
        self.last_id: str | None = None

    # -- connecting ---------------------------------------------------------------------------
    async def connect(self, resume: bool = False) -> None:
        """Connects (trying again until a process accepts, as presence.js backs off), then
        takes its rooms back: a socket re-joins them; a stream resumed with them keeps them."""
        for attempt in range(200):
            try:
                resumed = await (self._open_ws() if self.kind == "ws" else self._open_sse(resume))
                break
            except Exception:  # noqa: BLE001 - refused or reset under load: again, later
                self.load.counts["connect_retry"] += 1
                await asyncio.sleep(min(5.0, 0.2 * (attempt + 1)))
        else:
            raise RuntimeError("could not connect")
        self.open = True
        self.load.counts["connect"] += 1
        if not resumed:
            rooms, self.rooms = sorted(self.rooms), set()
            for room in rooms:
                await self.join(room)

    async def _open_ws(self) -> bool:
        cfg = self.load.config
        self.ws = await connect(
            cfg["ws_url"],
            origin=cfg["origin"],
            additional_headers={"Cookie": self.cookie},
            ping_interval=None,
            open_timeout=TIMEOUT,
            max_queue=None,
        )
        hello = json.loads(await asyncio.wait_for(self.ws.recv(), TIMEOUT))
        if hello.get("type") != "hello":
            raise RuntimeError(f"expected hello, got {hello}")
        self.user = hello["user"]
        ws = self.ws
        self.tasks = [
            asyncio.create_task(self._read_ws(ws)),
            asyncio.create_task(self._beat(ws)),
        ]
        return False

    async def _read_ws(self, ws: ClientConnection) -> None:
        with contextlib.suppress(Exception):
            async for text in ws:
                frame = json.loads(text)
                kind = frame.get("type")
                waiter = self.waiter
                if waiter is None or waiter[2].done():
                    if kind == "error" and frame.get("frame") != "sync":
                        self.load.counts[f"error:{frame.get('code')}"] += 1
                    continue
                want, room, future = waiter
                if kind == "error" and frame.get("frame") == want:
                    self.load.counts[f"error:{frame.get('code')}"] += 1
                    future.set_result(str(frame.get("code")))
                elif (
                    (want == "join" and kind == "presence.state" and frame.get("room") == room)
                    or (want == "heartbeat" and kind == "heartbeat.ack")
                    # a leave has no answer of its own (no leave is announced while another
                    # connection of the user is in the room): the unknown "sync" frame's error
                    # comes after the leave was handled
                    or (want == "leave" and kind == "error" and frame.get("frame") == "sync")
                ):
                    future.set_result("ok")
        if ws is self.ws:
            self.open = False

    async def _beat(self, ws: ClientConnection) -> None:
        every = float(self.load.config["heartbeat"])
        await asyncio.sleep(self.rng.uniform(0, every))
        with contextlib.suppress(Exception):
            while True:
                await ws.send('{"type": "heartbeat"}')
                await asyncio.sleep(every)

    async def _open_sse(self, resume: bool) -> bool:
        host, port = self.load.host, self.load.port
        reader, writer = await asyncio.open_connection(host, port)
        head = (
            f"GET /presence/sse/ HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Accept: text/event-stream\r\nCookie: {self.cookie}\r\n"
        )
        if resume and self.last_id:
            head += f"Last-Event-ID: {self.last_id}\r\n"
        writer.write((head + "\r\n").encode())
        try:
            status = await asyncio.wait_for(reader.readline(), TIMEOUT)
            if b" 200 " not in status:
                raise RuntimeError(f"stream refused: {status!r}")
            chunked = False
            while (line := await reader.readline()) not in (b"\r\n", b""):
                chunked |= line.lower().startswith(b"transfer-encoding: chunked")
            hello: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            self.tasks = [asyncio.create_task(self._read_sse(reader, writer, chunked, hello))]
            first = await asyncio.wait_for(hello, TIMEOUT)
        except BaseException:
            writer.close()
            raise
        self.writer = writer
        self.user, self.stream, self.csrf = first["user"], first["stream"], first["csrf"]
        return bool(first.get("resumed"))

    async def _read_sse(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        chunked: bool,
        hello: asyncio.Future[dict[str, Any]],
    ) -> None:
        with contextlib.suppress(Exception):
            async for lines in sse_blocks(reader, chunked):
                for line in lines:
                    if line.startswith(b"id:"):
                        self.last_id = line[3:].strip().decode()
                    elif line.startswith(b"data:") and not hello.done():
                        frame = json.loads(line[5:])
                        if frame.get("type") == "hello":
                            hello.set_result(frame)
                    elif line.startswith(b'data: {"type": "error"'):
                        # a room a resumed stream could not re-enter: out of it
                        frame = json.loads(line[5:])
                        self.load.counts[f"error:{frame.get('code')}"] += 1
                        if frame.get("frame") == "join":
                            self.rooms.discard(frame.get("room"))
        if not hello.done():
            hello.set_exception(ConnectionError("stream ended before its hello"))
        if writer is self.writer:
            self.open = False

    async def post(self, frame_type: str, body: dict[str, Any]) -> int:
        """One REST call of the stream through the front; its HTTP status (0: no answer)."""
        host, port = self.load.host, self.load.port
        data = json.dumps(body).encode()
        token = secrets.token_hex(16)
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            return 0
        try:
            writer.write(
                (
                    f"POST /presence/api/stream/{frame_type}/ HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Connection: close\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(data)}\r\nOrigin: http://{host}:{port}\r\n"
                    f"Cookie: {self.cookie}; csrftoken={token}\r\nX-CSRFToken: {token}\r\n"
                    f"X-Presence-Stream: {self.stream}\r\n\r\n"
                ).encode()
                + data
            )
            line = await asyncio.wait_for(reader.readline(), TIMEOUT)
            await asyncio.wait_for(reader.read(), TIMEOUT)
            return int(line.split()[1]) if line else 0
        except (OSError, TimeoutError, ValueError, IndexError):
            return 0
        finally:
            writer.close()

    # -- closing ------------------------------------------------------------------------------
    async def close(self, abort: bool = False) -> None:
        """A clean close (a tab closed), or ``abort``: the TCP connection dropped."""
        self.open = False
        ws, writer = self.ws, self.writer
        self.ws, self.writer = None, None
        for task in self.tasks:  # the reader and heartbeat (websockets closes on its own)
            task.cancel()
        if ws is not None:
            if abort:
                ws.transport.abort()
            else:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(ws.close(), 10)
        if writer is not None:
            if abort:
                writer.transport.abort()
            else:
                writer.close()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks = []

    # -- the actions --------------------------------------------------------------------------
    async def _ask(self, frame_type: str, room: str = "") -> str:
        """Sends a frame and waits for its outcome: "ok", or the error's code ("closed" when
        the connection is gone, "timeout" without an answer). A socket hears its join's
        ``presence.state``, a barrier after its leave or a heartbeat's ack; a stream's REST
        call answers 200 or an error status."""
        if self.kind == "sse":
            status = await self.post(frame_type, {"room": room})
            if status != 200:
                self.load.counts[f"rest:{status}"] += 1
            return {200: "ok", 503: "unavailable", 0: "closed"}.get(status, str(status))
        if self.ws is None:
            return "closed"
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiter = (frame_type, room, future)
        body: dict[str, Any] = {"type": frame_type}
        if room:
            body["room"] = room
        try:
            await self.ws.send(json.dumps(body))
            if frame_type == "leave":
                await self.ws.send('{"type": "sync"}')
            return await asyncio.wait_for(future, TIMEOUT)
        except TimeoutError:
            return "timeout"
        except Exception:  # noqa: BLE001 - closed meanwhile
            return "closed"
        finally:
            self.waiter = None

    async def _insist(self, frame_type: str, room: str) -> str:
        """A join or leave, asked again 2-5 s later while Redis is unavailable (presence.js does
        so for its joins; a leave is asked again here too, so that the truth stays known)."""
        for _ in range(10):
            outcome = await self._ask(frame_type, room)
            if outcome == "404":
                # "gone": no stream answered in time (a busy process). As presence.js does, the
                # stream is replaced by a new one, which re-joins the rooms it knows of; the
                # call is then made again on it.
                await self.close()
                await self.connect()
                continue
            if outcome != "unavailable":
                return outcome
            self.load.counts[f"{frame_type}_retried"] += 1
            await asyncio.sleep(self.rng.uniform(2.0, 5.0))
        return "unavailable"

    async def join(self, room: str) -> None:
        outcome = await self._insist("join", room)
        if outcome == "ok":
            self.rooms.add(room)
        else:
            self.load.counts[f"join_failed:{outcome}"] += 1

    async def leave(self, room: str) -> None:
        outcome = await self._insist("leave", room)
        if outcome in ("ok", "closed", "not_joined"):  # a closed connection leaves it too
            self.rooms.discard(room)
        else:
            self.load.counts[f"leave_failed:{outcome}"] += 1

    async def status(self) -> None:
        body = {"state": self.rng.choice(STATES), "message": self.rng.choice(MESSAGES)}
        if self.kind == "ws":
            assert self.ws is not None
            with contextlib.suppress(Exception):
                await self.ws.send(json.dumps({"type": "status", **body}))
        else:
            status = await self.post("status", body)
            if status != 200:
                self.load.counts[f"rest:{status}"] += 1

    async def act(self, until: float) -> None:
        cfg, rng = self.load.config, self.rng
        action = rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
        self.load.counts[action] += 1
        rooms = cfg["rooms"]
        if action == "join":
            free = [r for r in rng.sample(rooms, 4) if r not in self.rooms]
            if len(self.rooms) < int(cfg["max_rooms"]) and free:
                await self.join(free[0])
            elif self.rooms:
                await self.leave(rng.choice(sorted(self.rooms)))
        elif action == "leave" and self.rooms:
            await self.leave(rng.choice(sorted(self.rooms)))
        elif action == "status":
            await self.status()
        elif action in ("reconnect", "drop"):
            await self.close(abort=action == "drop")
            # back within the grace: a socket at once, a stream after its retry: (2 s)
            await asyncio.sleep(rng.uniform(0.2, 2.0) + (2.0 if self.kind == "sse" else 0.0))
            await self.connect(resume=True)
        elif action == "away":  # gone for longer than the grace: a new visit later
            await self.close()
            away = rng.uniform(1.0, 2.0) * float(cfg["away"])
            await asyncio.sleep(min(away, max(1.0, until - asyncio.get_running_loop().time())))
            self.rooms, self.last_id = set(), None
            await self.connect()

    async def run(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        mean = float(self.load.config["mean_gap"])
        await asyncio.sleep(self.rng.uniform(0, float(self.load.config["ramp"])))
        await self.connect()
        self.load.connected += 1
        while True:
            gap = self.rng.expovariate(1 / mean)
            if loop.time() + gap >= until:
                break
            await asyncio.sleep(gap)
            if not self.open:  # closed by the server: back, into the rooms it knows of
                self.load.counts["closed_by_server"] += 1
                await self.close()
                await self.connect()
                continue
            try:
                await self.act(until)
            except Exception as exc:  # noqa: BLE001 - counted; the actor goes on
                self.load.counts[f"failed:{type(exc).__name__}"] += 1
        await asyncio.sleep(max(0.0, until - loop.time()))

    async def settle(self) -> bool:
        """A stayer's proof that the server has handled its frames: a heartbeat's ack (frames
        are handled in order); a stream's calls were answered already. False: not connected."""
        if not self.open:
            return False
        if self.kind == "sse":
            return True
        return await self._ask("heartbeat") == "ok"


class Load:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.host, self.port = config["host"], int(config["port"])
        self.counts: Counter[str] = Counter()
        self.connected = 0
        rng = random.Random(config["seed"])
        self.actors = [
            Actor(self, kind, cookie, random.Random(rng.random()))
            for kind, cookie in config["actors"]
        ]

    def truth(self, stayers: list[Actor]) -> dict[str, list[str]]:
        return {a.user: sorted(a.rooms) for a in stayers if a.open}


async def main(config: dict[str, Any]) -> None:
    # The client must not stall on full collections of its own thousands of objects.
    gc.freeze()
    load = Load(config)
    loop = asyncio.get_running_loop()
    until = loop.time() + float(config["seconds"])
    await asyncio.gather(*(a.run(until) for a in load.actors))
    n_stay = int(len(load.actors) * float(config["stay"]))
    stayers, leavers = load.actors[:n_stay], load.actors[n_stay:]
    await asyncio.gather(*(a.close() for a in leavers))
    # A stayer the server closed at the very end is connected again first.
    for actor in stayers:
        if not actor.open:
            await actor.close()
            await actor.connect()
    settled = await asyncio.gather(*(a.settle() for a in stayers))
    print(
        json.dumps(
            {
                "truth": load.truth(stayers),
                "unsettled": sum(1 for ok in settled if not ok),
                "counts": dict(load.counts),
                "connected": load.connected,
                "actors": len(load.actors),
            }
        ),
        flush=True,
    )
    await loop.run_in_executor(None, sys.stdin.readline)  # the soak has read the stayers
    await asyncio.gather(*(a.close() for a in stayers))
    print(json.dumps({"closed": len(stayers)}), flush=True)


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(sys.argv[1]) as f:
        asyncio.run(main(json.load(f)))
