"""A socket's incoming messages, read from the server as they come, handed over in order.

An ASGI server reads a WebSocket only while the application takes what it read: uvicorn pauses
the transport's reading with each message until the application's ``receive()`` takes it, and
Channels' consumer calls ``receive()`` again only once it has handled the last message. A frame
handled slowly (a join whose snapshot waits for a core in a storm of joins) so stops the server
reading the socket at all, the pong to its own keepalive ping included: after
``--ws-ping-timeout`` uvicorn closes with 1011 a socket whose browser answered in time.

:class:`Inbox` is the consumer's ``receive``: it keeps taking the server's messages into a queue
of its own while the consumer works, so the server goes on reading (and answering its pings);
the consumer still gets every message in order, one at a time. Past :data:`MAX_QUEUED` messages
it stops taking them, and the server stops reading, as before: a socket that floods waits (and
its frame rate ends it), its messages are never dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: Messages read ahead of the consumer at most (a browser sends a heartbeat every few seconds
#: and a frame per action: a join takes minutes to fall this far behind).
MAX_QUEUED = 64

Receive = Callable[[], Awaitable[dict[str, Any]]]


class Inbox:
    """``receive`` for the consumer: the server's messages, read ahead (see the module)."""

    def __init__(self, receive: Receive, size: int = MAX_QUEUED) -> None:
        self.server_receive = receive
        self.queue: asyncio.Queue[dict[str, Any] | BaseException] = asyncio.Queue(size)
        self.reader: asyncio.Task[None] | None = None

    async def __call__(self) -> dict[str, Any]:
        if self.reader is None:  # on the consumer's first receive, in its event loop
            self.reader = asyncio.get_running_loop().create_task(self._read())
        got = await self.queue.get()
        if isinstance(got, BaseException):
            raise got
        return got

    async def _read(self) -> None:
        while True:
            try:
                message = await self.server_receive()
            except Exception as exc:  # the consumer's receive raises it, as the server's would
                await self.queue.put(exc)
                return
            await self.queue.put(message)  # waits while the consumer is MAX_QUEUED behind
            if message.get("type") == "websocket.disconnect":
                return  # nothing comes after it

    def close(self) -> None:
        """The consumer ended: nothing more is read for it."""
        if self.reader is not None:
            self.reader.cancel()
