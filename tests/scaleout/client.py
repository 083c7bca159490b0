"""A real WebSocket client of the presence socket (the ``websockets`` package), as a browser tab:
the session cookie, an Origin header, heartbeats at the interval the server's hello names."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed


class Tab:
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
        conn = await connect(url, origin=origin, open_timeout=10,
                             additional_headers={"Cookie": f"sessionid={session_key}"})
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
        self.frames.put_nowait({"type": "<closed>"})

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

    async def wait_for(self, type: str, /, timeout: float = 5.0, **match: Any) -> dict[str, Any]:
        """The next frame of ``type`` whose fields equal ``match``; other frames are skipped."""
        return (await self.wait_all((type, match), timeout=timeout))[0]

    async def wait_all(self, *specs: tuple[str, dict[str, Any]], timeout: float = 5.0,
                       ) -> list[dict[str, Any]]:
        """One frame per ``(type, match)``, in whatever order they come."""
        loop = asyncio.get_running_loop()
        deadline, found, skipped = loop.time() + timeout, [None] * len(specs), []
        while None in found:
            try:
                frame = await asyncio.wait_for(self.frames.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                missing = [s for s, f in zip(specs, found, strict=True) if f is None]
                raise AssertionError(
                    f"{self.name}: no {missing} within {timeout}s; skipped {skipped}") from None
            for i, (type_, match) in enumerate(specs):
                if found[i] is None and frame["type"] == type_ and all(
                        frame.get(k) == v for k, v in match.items()):
                    found[i] = frame
                    break
            else:
                skipped.append(frame)
        return found

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


def about(frames: list[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    """The presence events among ``frames`` that concern ``user``."""
    return [f for f in frames if f.get("user") == user and f["type"].startswith("presence.")]
