"""An SSE client of a real server (tests/servers.py), as a browser's ``EventSource`` plus the
REST calls presence.js makes: a session cookie, raw HTTP/1.1 on asyncio (chunked bodies
decoded, ``id:`` / ``data:`` / comment lines parsed), ``Last-Event-ID`` on a reconnect, and the
CSRF cookie and header on every POST.

Every frame goes to the inbox (``wait_for`` and ``wait_all`` of tests/frame_waits.py read it);
comment lines are counted in ``comments``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

from tests.frame_waits import CLOSED, FrameWaits
from tests.servers import AsgiServer, User


class HttpError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status = status
        self.body = body


async def _head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status = int((await reader.readline()).split()[1])
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


async def request(
    server: AsgiServer,
    method: str,
    path: str,
    user: User | None,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 20,
) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request with ``Connection: close``; (status, decoded JSON body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: 127.0.0.1:{server.port}",
            "Connection: close",
            f"Content-Length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if user is not None:
            lines.append(f"Cookie: {user.cookie}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        status, head = await asyncio.wait_for(_head(reader), timeout)
        raw = await asyncio.wait_for(reader.read(), timeout)
        if head.get("transfer-encoding") == "chunked":
            raw = _unchunk(raw)
        try:
            return status, json.loads(raw or b"{}")
        except ValueError:
            return status, {"raw": raw.decode("utf-8", "replace")}
    finally:
        writer.close()


def _unchunk(raw: bytes) -> bytes:
    out, pos = b"", 0
    while True:
        end = raw.index(b"\r\n", pos)
        size = int(raw[pos:end].split(b";")[0], 16)
        if size == 0:
            return out
        out += raw[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


class SseClient(FrameWaits):
    """One presence stream (``GET /presence/sse/``) and the REST calls that drive it."""

    def __init__(
        self, server: AsgiServer, user: User | None, *, name: str = "", path: str = "/presence/sse/"
    ) -> None:
        self.server = server
        self.user = user
        self.name = name or (user.username if user else "anonymous")
        self.path = path
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.hello: dict[str, Any] = {}
        self.last_id: str | None = None
        self.comments = 0
        self.csrf = secrets.token_hex(16)  # Django accepts a 32-character secret as the cookie
        self.writer: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return self.hello.get("user", "")

    async def connect(self, timeout: float = 15, *, resume: bool = False) -> SseClient:
        """Opens the stream (sending ``Last-Event-ID`` when ``resume``) and waits for hello."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        lines = [
            f"GET {self.path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.server.port}",
            "Accept: text/event-stream",
            "Cache-Control: no-cache",
            "Connection: close",
        ]
        if self.user is not None:
            lines.append(f"Cookie: {self.user.cookie}")
        if resume and self.last_id:
            lines.append(f"Last-Event-ID: {self.last_id}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, headers = await asyncio.wait_for(_head(reader), timeout)
        if status != 200:
            body = await asyncio.wait_for(reader.read(), timeout)
            writer.close()
            raise HttpError(status, body.decode("utf-8", "replace"))
        assert headers.get("content-type", "").startswith("text/event-stream"), headers
        self.writer = writer
        self.inbox = asyncio.Queue()
        self.task = asyncio.ensure_future(
            self._read(reader, headers.get("transfer-encoding") == "chunked")
        )
        while (frame := await self.next(timeout))["type"] != "hello":
            pass
        self.hello = frame
        return self

    async def _read(self, reader: asyncio.StreamReader, chunked: bool) -> None:
        buffer = b""
        try:
            while True:
                if chunked:
                    size = int((await reader.readline()).split(b";")[0], 16)
                    if size == 0:
                        break
                    data = await reader.readexactly(size + 2)
                    buffer += data[:-2]
                else:
                    data = await reader.read(65536)
                    if not data:
                        break
                    buffer += data
                while b"\n\n" in buffer:
                    block, buffer = buffer.split(b"\n\n", 1)
                    self._event(block.decode())
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self.inbox.put_nowait({"type": CLOSED})

    def _event(self, block: str) -> None:
        data = []
        for line in block.split("\n"):
            if line.startswith(":"):
                self.comments += 1
            elif line.startswith("id:"):
                self.last_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            self.inbox.put_nowait(json.loads("\n".join(data)))

    async def next(self, timeout: float) -> dict[str, Any]:
        return await asyncio.wait_for(self.inbox.get(), timeout)

    # -- REST ----------------------------------------------------------------------------------
    async def post(
        self, frame_type: str, *, stream: str | None = None, csrf: bool = True, **fields: Any
    ) -> tuple[int, dict[str, Any]]:
        """``POST /presence/api/stream/<frame_type>/`` as presence.js sends it."""
        headers = {
            "Content-Type": "application/json",
            "Origin": self.server.origin,
            "X-Presence-Stream": self.hello.get("stream", "") if stream is None else stream,
        }
        if csrf:
            headers["X-CSRFToken"] = self.csrf
        user = self.user
        if user is not None:  # the session cookie and the CSRF cookie together
            user = User(user.id, user.username, f"{user.session}; csrftoken={self.csrf}")
        return await request(
            self.server,
            "POST",
            f"/presence/api/stream/{frame_type}/",
            user,
            body=json.dumps(fields).encode(),
            headers=headers,
        )

    async def join(self, room: str, timeout: float = 10.0, **extra: Any) -> dict[str, Any]:
        status, body = await self.post("join", room=room, **extra)
        assert status == 200, (status, body)
        return await self.wait_for("presence.state", timeout=timeout, room=room)

    # -- ending --------------------------------------------------------------------------------
    async def close(self) -> None:
        """The browser closes the stream (a tab closed): the TCP connection ends."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
