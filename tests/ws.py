"""Helpers for the WebSocket tests: logged-in sockets on the real ASGI stack, short timers, and
a Redis MONITOR that counts the script calls the server really made."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import urlparse

from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import AsyncClient, override_settings

from .frame_waits import CLOSED, FrameWaits
from .users import acreate_user

ORIGIN = b"http://testserver"

#: Timers short enough to watch leases expire within a test (checks: LEASE_TTL > HEARTBEAT).
FAST = {
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 2,
    "DISCONNECT_GRACE": 0.5,
    "SWEEP_INTERVAL": 0.2,
    "HEARTBEAT_FLUSH_INTERVAL": 0.2,
}


def presence_settings(**overrides: Any) -> override_settings:
    return override_settings(PRESENCE={**settings.PRESENCE, **FAST, **overrides})


def application() -> Any:
    from project.asgi import application

    return application


async def make_user(name: str) -> tuple[Any, str]:
    """A user (of any user model: tests/users.py) and the session cookie of a login."""
    user = await acreate_user(name, password="x")
    client = AsyncClient()
    await client.aforce_login(user)
    return user, client.cookies[settings.SESSION_COOKIE_NAME].value


class Socket(FrameWaits):
    """A WebsocketCommunicator that reads without cancelling the app on a timeout."""

    WAIT_TIMEOUT = 20.0  # ends when the frame comes (tests/frame_waits.py)

    def __init__(self, comm: WebsocketCommunicator, name: str = "") -> None:
        self.comm = comm
        self.name = name
        self.hello: dict[str, Any] = {}
        self.pump: asyncio.Task[None] | None = None
        self.closed_with: int | None = None

    @classmethod
    async def open(
        cls,
        cookie: str | None,
        *,
        origin: bytes | None = ORIGIN,
        path: str = "/ws/presence/",
        name: str = "",
        app: Any = None,
    ) -> Socket:
        """A logged-in socket (``cookie``) on ``app`` (the demo's project.asgi by default)."""
        headers = []
        if origin is not None:
            headers.append((b"origin", origin))
        if cookie is not None:
            headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
        sock = cls(WebsocketCommunicator(app or application(), path, headers=headers), name)
        connected, _ = await sock.comm.connect(timeout=20)
        assert connected
        sock.hello = await sock.wait_for("hello")
        return sock

    @property
    def user(self) -> str:
        return self.hello["user"]

    async def send(self, **frame: Any) -> None:
        await self.comm.send_json_to(frame)

    async def send_text(self, text: str) -> None:
        await self.comm.send_input({"type": "websocket.receive", "text": text})

    async def next(self, timeout: float) -> dict[str, Any]:
        message = await asyncio.wait_for(self.comm.output_queue.get(), timeout)
        if message["type"] == "websocket.close":
            self.closed_with = message.get("code", 1000)
            return {"type": CLOSED, "code": self.closed_with}
        return json.loads(message["text"])

    def drain(self) -> list[dict[str, Any]]:
        out = []
        while not self.comm.output_queue.empty():
            message = self.comm.output_queue.get_nowait()
            if message["type"] == "websocket.send":
                out.append(json.loads(message["text"]))
        return out

    def beat(self, every: float = 0.5) -> None:
        """Heartbeat in the background, as presence.js does."""

        async def pump() -> None:
            while True:
                await self.send(type="heartbeat")
                await asyncio.sleep(every)

        self.pump = asyncio.ensure_future(pump())

    def _stop_pump(self) -> None:
        if self.pump is not None:
            self.pump.cancel()

    async def close(self) -> None:
        self._stop_pump()
        await self.comm.disconnect(timeout=20)

    async def vanish(self) -> None:
        """The socket's process dies: no close, no disconnect, nothing more from it."""
        self._stop_pump()
        self.comm.future.cancel()
        await asyncio.gather(self.comm.future, return_exceptions=True)


async def shutdown() -> None:
    """End the loop's other tasks (sockets, sweeper, coalescer) and close its store."""
    from presence_app.core.connection import aclose_async_store

    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await aclose_async_store()


class Monitor:
    """Redis MONITOR on its own connection: every command the server executes, as argument
    lists. Counting real calls, not mocks, is how the batching is shown."""

    ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')

    def __init__(self) -> None:
        url = urlparse(settings.REDIS_URL)
        self.host, self.port = url.hostname, url.port or 6379
        self.commands: list[list[str]] = []

    async def __aenter__(self) -> Monitor:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(b"MONITOR\r\n")
        assert (await self.reader.readline()).startswith(b"+OK")
        self.task = asyncio.ensure_future(self._read())
        return self

    async def _read(self) -> None:
        while line := await self.reader.readline():
            self.commands.append(self.ARG.findall(line.decode("utf-8", "replace")))

    async def __aexit__(self, *exc: object) -> None:
        self.task.cancel()
        self.writer.close()

    def script_calls(self, sha: str) -> list[list[str]]:
        return [
            c for c in self.commands if len(c) > 1 and c[0].upper() == "EVALSHA" and c[1] == sha
        ]
