"""Bounds of a user's connections (issue 41): at most ``MAX_CONNECTIONS_PER_USER`` at once, the
next refused with a close code of its own; and REST calls to an ended SSE stream answered at
once (not after the reply's 15 s timeout) and rate limited. Real sockets and streams, the real
channels-redis layer and a real Redis."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import AsyncClient

from presence_app import presence
from presence_app.consumers import CLOSE_TOO_MANY_CONNECTIONS
from presence_app.realtime import lifecycle, rest
from presence_app.realtime.sse import stream_token

from ..users import acreate_user
from ..ws import ORIGIN, Socket, application, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def fast(redis_client):
    channel_layers.backends.clear()
    with presence_settings(MAX_CONNECTIONS_PER_USER=2):
        yield
        await shutdown()
    channel_layers.backends.clear()


async def refused_socket(cookie: str) -> tuple[list[dict], int]:
    """Opens a socket that the server accepts and then closes: (its frames, its close code)."""
    session = f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()
    headers = [(b"origin", ORIGIN), (b"cookie", session)]
    comm = WebsocketCommunicator(application(), "/ws/presence/", headers=headers)
    connected, _ = await comm.connect(timeout=5)
    assert connected  # accepted first, so that the browser gets to see the code
    frames = []
    while True:
        message = await comm.receive_output(timeout=10)
        if message["type"] == "websocket.close":
            return frames, message["code"]
        frames.append(json.loads(message["text"]))


async def connections_of(user) -> list[str]:
    """The user's connections the store holds (the default workspace's)."""
    found = await database_sync_to_async(presence.export)(user)
    return found["workspaces"].get("", {}).get("connections", [])


# -- a user's connections --------------------------------------------------------------------
async def test_a_user_holds_at_most_max_connections(fast):
    ann, cookie = await make_user("ann")
    _, other = await make_user("bob")
    one = await Socket.open(cookie, name="ann-1")
    two = await Socket.open(cookie, name="ann-2")
    frames, code = await refused_socket(cookie)
    assert code == CLOSE_TOO_MANY_CONNECTIONS == 4429
    assert [(f["type"], f["code"]) for f in frames] == [("error", "too_many_connections")]
    assert "at most 2 connections" in frames[0]["detail"]
    assert len(await connections_of(ann)) == 2
    bob = await Socket.open(other, name="bob")  # another user's are their own
    # One closed, its lease gone after the grace: a new connection is let in again.
    await one.close()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 15
    while len(await connections_of(ann)) > 1:
        assert loop.time() < deadline, "the closed connection never ended"
        await asyncio.sleep(0.1)
    three = await Socket.open(cookie, name="ann-3")
    assert three.hello["me"]["state"] == "online"
    for sock in (two, three, bob):
        await sock.close()


# -- REST calls of an ended SSE stream ----------------------------------------------------------
class Stream:
    """An SSE stream served in this process by the real ASGI application, as a server drives
    it: ``close()`` is the browser going away (``http.disconnect``)."""

    def __init__(self, cookie: str) -> None:
        session = f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/presence/sse/",
            "raw_path": b"/presence/sse/",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"testserver"), (b"cookie", session)],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.comm = ApplicationCommunicator(application(), scope)

    async def open(self) -> dict:
        """Sends the request; returns the stream's ``hello``."""
        await self.comm.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await self.comm.receive_output(10)
        assert start["type"] == "http.response.start" and start["status"] == 200, start
        buffer = b""
        while b"data: " not in buffer or b"\n\n" not in buffer.split(b"data: ", 1)[1]:
            buffer += (await self.comm.receive_output(10))["body"]
        return json.loads(buffer.split(b"data: ", 1)[1].split(b"\n\n", 1)[0])

    async def close(self) -> None:
        await self.comm.send_input({"type": "http.disconnect"})
        await self.comm.wait(10)


async def test_calls_to_an_ended_stream_are_answered_at_once_and_rate_limited(redis_client):
    channel_layers.backends.clear()
    with presence_settings(MAX_FRAMES_PER_SECOND=1):
        user, cookie = await make_user("ann")
        client = AsyncClient()
        await client.aforce_login(user)
        stream = Stream(cookie)
        hello = await stream.open()
        assert hello["type"] == "hello" and hello["transport"] == "sse"
        headers = {"X-Presence-Stream": hello["stream"]}
        ok = await client.post(
            "/presence/api/stream/join/", {"room": "lobby"}, "application/json", headers=headers
        )
        assert ok.status_code == 200, ok.content

        await stream.close()  # the browser went: the stream ends
        rest._calls.clear()  # the join took this second's call: the next one is let through
        started = time.monotonic()
        gone = await client.post(
            "/presence/api/stream/join/", {"room": "lobby"}, "application/json", headers=headers
        )
        assert gone.status_code == 404 and gone.json()["code"] == "gone"
        assert time.monotonic() - started < rest.REPLY_TIMEOUT / 3  # at once, not after 15 s
        # A user who keeps calling is refused before any stream is asked.
        answers = [
            await client.post(
                "/presence/api/stream/typing/", {"room": "x"}, "application/json", headers=headers
            )
            for _ in range(5)
        ]
        limited = [r for r in answers if r.status_code == 429]
        assert limited, [r.status_code for r in answers]
        assert limited[0].json()["code"] == "rate_limited" and limited[0]["Retry-After"]
        await shutdown()
    channel_layers.backends.clear()


async def test_a_stream_no_process_answered_for_is_known_ended(redis_client, monkeypatch):
    """A stream of another process (or of one that died): the first call waits for an answer
    that never comes, the next ones are answered at once."""
    channel_layers.backends.clear()
    monkeypatch.setattr(rest, "REPLY_TIMEOUT", 0.5)
    with presence_settings():
        user = await acreate_user("ann", password="x")
        client = AsyncClient()
        await client.aforce_login(user)
        channel = "asgi.specific.of-a-process-that-died"
        headers = {"X-Presence-Stream": stream_token(str(user.pk), channel)}
        assert not lifecycle.stream_ended(channel)
        url = "/presence/api/stream/heartbeat/"
        first = await client.post(url, {}, "application/json", headers=headers)
        assert first.status_code == 404
        assert lifecycle.stream_ended(channel)
        await shutdown()
    channel_layers.backends.clear()
