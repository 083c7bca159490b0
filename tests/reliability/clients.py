"""WebSocket clients of a real server (tests/servers.py), as presence.js talks to it: a session
cookie and the server's own Origin, JSON text frames, heartbeats in the background.

Hundreds of them run in one event loop. Every frame a client receives goes to its inbox
(``wait_for`` and ``wait_all``, tests/frame_waits.py, read it in order, skipping what
does not match) and to its ``listeners``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.frame_waits import CLOSED, FrameWaits
from tests.servers import AsgiServer, User

EVENTS = ("presence.join", "presence.leave", "presence.update", "presence.typing")


class Refused(Exception):
    """The handshake was refused with an HTTP status (``status``)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"handshake refused with HTTP {status}")
        self.status = status


class Client(FrameWaits):
    def __init__(
        self,
        server: AsgiServer,
        user: User | None,
        *,
        name: str = "",
        origin: str | None = "",
        path: str = "",
    ) -> None:
        self.server = server
        self.user = user
        self.name = name or (user.username if user else "anonymous")
        self.origin = server.origin if origin == "" else origin
        self.url = server.ws_url + path
        self.ws: ClientConnection | None = None
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.hello: dict[str, Any] = {}
        self.early: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self.closed = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.received = 0

    # -- connection ---------------------------------------------------------------------------
    async def connect(self, timeout: float = 15, *, hello: bool = True) -> Client:
        headers = {"Cookie": self.user.cookie} if self.user else {}
        try:
            self.ws = await connect(
                self.url,
                additional_headers=headers,
                origin=self.origin,  # type: ignore[arg-type]
                open_timeout=timeout,
                ping_interval=None,
                close_timeout=2,
                max_queue=None,
                max_size=2**22,
            )
        except InvalidStatus as exc:
            raise Refused(exc.response.status_code) from None
        self.closed.clear()
        self.close_code = None
        self.inbox = asyncio.Queue()  # nothing of an earlier connection
        self.tasks.append(asyncio.ensure_future(self._read(self.ws)))
        if hello:
            # Frames before the hello (an error from connect()) are kept in ``early``.
            while (frame := await self.wait_any(timeout))["type"] != "hello":
                self.early.append(frame)
            self.hello = frame
        return self

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for message in ws:
                frame = json.loads(message)
                self.received += 1
                self.inbox.put_nowait(frame)
                for listener in self.listeners:
                    listener(frame)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = ws.close_code if ws.close_code is not None else 1006
            self.inbox.put_nowait({"type": CLOSED, "code": self.close_code})
            self.closed.set()

    @property
    def open(self) -> bool:
        return self.ws is not None and not self.closed.is_set()

    @property
    def id(self) -> str:
        return self.hello.get("user", "")

    # -- frames -------------------------------------------------------------------------------
    async def send(self, **frame: Any) -> None:
        await self.send_text(json.dumps(frame))

    async def send_text(self, text: str) -> None:
        assert self.ws is not None
        await self.ws.send(text)

    async def send_raw(self, data: str | bytes) -> None:
        """A text frame (str) or a binary one (bytes), as given."""
        assert self.ws is not None
        await self.ws.send(data)

    async def next(self, timeout: float) -> dict[str, Any]:
        return await asyncio.wait_for(self.inbox.get(), timeout)

    async def reply(self, timeout: float = 30.0, **frame: Any) -> list[dict[str, Any]]:
        """Sends ``frame``, then a frame of an unknown type as a barrier: the answers that came
        back in between (the socket handles its frames in order, so they answer ``frame``).
        Events of the socket's groups (join, leave, update, typing) come through the channel
        layer, in no order with the answers, and the acks of background heartbeats answer
        other frames: they are left out (an ack stays when ``frame`` is a heartbeat)."""
        await self.send(**frame)
        noise = EVENTS if frame.get("type") == "heartbeat" else (*EVENTS, "heartbeat.ack")
        return [f for f in await self.barrier(timeout) if f["type"] not in noise]

    async def barrier(self, timeout: float = 30.0) -> list[dict[str, Any]]:
        await self.send(type="sync")
        out = []
        while True:
            got = await self.wait_any(timeout)
            if got["type"] == "error" and got.get("frame") == "sync":
                return out
            out.append(got)

    async def wait_any(self, timeout: float) -> dict[str, Any]:
        try:
            frame = await self.next(timeout)
        except TimeoutError:
            raise AssertionError(f"{self.name}: nothing within {timeout}s") from None
        if frame["type"] == CLOSED:
            raise AssertionError(f"{self.name}: closed ({frame['code']})")
        return frame

    async def wait_any_or_close(self, timeout: float) -> dict[str, Any]:
        """The next frame, or the close (``{"type": CLOSED, "code": ...}``)."""
        try:
            return await self.next(timeout)
        except TimeoutError:
            raise AssertionError(f"{self.name}: nothing within {timeout}s") from None

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while not self.inbox.empty():
            out.append(self.inbox.get_nowait())
        return out

    async def join(self, room: str, timeout: float = 30.0) -> dict[str, Any]:
        await self.send(type="join", room=room)
        return await self.wait_for("presence.state", timeout=timeout, room=room)

    def beat(self, every: float = 1.0) -> None:
        """Heartbeat in the background, as presence.js does, until the socket closes."""

        async def pump() -> None:
            try:
                while self.open:
                    await self.send(type="heartbeat")
                    await asyncio.sleep(every)
            except ConnectionClosed:
                pass

        self.tasks.append(asyncio.ensure_future(pump()))

    # -- ending -------------------------------------------------------------------------------
    async def close(self, code: int = 1000) -> None:
        if self.ws is not None:
            await self.ws.close(code)
            await self.closed.wait()
        await self._stop_tasks()

    async def abort(self) -> None:
        """Drop the TCP connection without a close frame (a network failure)."""
        if self.ws is not None:
            self.ws.transport.abort()
            await self.closed.wait()
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()


async def connect_all(
    server: AsgiServer, users: Iterable[User], *, concurrency: int = 50, **kwargs: Any
) -> list[Client]:
    """One connected client per user, ``concurrency`` handshakes at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(user: User) -> Client:
        async with gate:
            return await Client(server, user, **kwargs).connect()

    return list(await asyncio.gather(*(one(u) for u in users)))


async def close_all(clients: Iterable[Client]) -> None:
    await asyncio.gather(*(c.close() for c in clients if c.ws is not None), return_exceptions=True)
