"""presence_app.realtime.inbox: the server's messages read ahead of a busy consumer, in order,
at most MAX_QUEUED of them, an error of the server's receive raised to the consumer."""

from __future__ import annotations

import asyncio

import pytest

from presence_app.realtime.inbox import Inbox


class Server:
    """An ASGI server's ``receive``: ``count`` text messages, then a disconnect (or ``error``)."""

    def __init__(self, count: int, error: Exception | None = None) -> None:
        self.sent = 0
        self.count, self.error = count, error

    async def receive(self) -> dict:
        await asyncio.sleep(0)
        if self.sent < self.count:
            self.sent += 1
            return {"type": "websocket.receive", "text": str(self.sent)}
        if self.error is not None:
            raise self.error
        self.sent += 1
        return {"type": "websocket.disconnect", "code": 1000}


async def test_the_server_is_read_while_the_consumer_is_busy_and_nothing_is_reordered():
    server = Server(10)
    inbox = Inbox(server.receive)
    first = await inbox()
    await asyncio.sleep(0.05)  # the consumer handles its first message: reading goes on
    assert server.sent == 11  # the ten and the disconnect
    rest = [await inbox() for _ in range(10)]
    texts = [m.get("text") for m in [first, *rest]]
    assert texts == [str(i) for i in range(1, 11)] + [None]
    assert rest[-1]["type"] == "websocket.disconnect"


async def test_it_stops_reading_as_far_ahead_as_it_may():
    server = Server(1000)
    inbox = Inbox(server.receive, size=5)
    await inbox()
    await asyncio.sleep(0.05)
    assert server.sent == 1 + 5 + 1  # taken, queued, and one waiting for room in the queue
    inbox.close()


async def test_an_error_of_the_servers_receive_reaches_the_consumer():
    inbox = Inbox(Server(1, error=ConnectionResetError("gone")).receive)
    assert (await inbox())["text"] == "1"
    with pytest.raises(ConnectionResetError):
        await inbox()
