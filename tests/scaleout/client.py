"""A real WebSocket client of the presence socket (the ``websockets`` package), as a browser tab:
the session cookie, an Origin header, heartbeats at the interval the server's hello names."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.frame_waits import CLOSED, FrameWaits


class Tab(FrameWaits):
    def __init__(self, name: str, conn: ClientConnection) -> None:
        self.name = name
        self.conn = conn
        self.frames: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.seen: list[dict[str, Any]] = []  # every frame received, in order
        self.hello: dict[str, Any] = {}
        self.reader = asyncio.ensure_future(self._read())
        self.pump: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str, session_key: str, name: str, origin: str) -> Tab:
        conn = await connect(
            url,
            origin=origin,
            open_timeout=10,
            additional_headers={"Cookie": f"sessionid={session_key}"},
        )
        tab = cls(name, conn)
        tab.hello = await tab.wait_for("hello", timeout=10)
        return tab

    @property
    def user(self) -> str:
        return self.hello["user"]

    async def _read(self) -> None:
        try:
            async for text in self.conn:
                frame = json.loads(text)
                self.seen.append(frame)
                self.frames.put_nowait(frame)
        except ConnectionClosed:
            pass
        self.frames.put_nowait({"type": CLOSED})

    async def send(self, **frame: Any) -> None:
        await self.conn.send(json.dumps(frame))

    def beat(self) -> None:
        """Heartbeats in the background at the server's interval, as presence.js does."""

        async def pump() -> None:
            with contextlib.suppress(ConnectionClosed):
                while True:
                    await self.send(type="heartbeat")
                    await asyncio.sleep(float(self.hello["heartbeat"]))

        self.pump = asyncio.ensure_future(pump())

    async def next(self, timeout: float) -> dict[str, Any]:
        return await asyncio.wait_for(self.frames.get(), timeout)

    async def joined(self, room: str) -> dict[str, Any]:
        await self.send(type="join", room=room)
        return await self.wait_for("presence.state", room=room)

    async def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.conn.close(), 5)
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)
