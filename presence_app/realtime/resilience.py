"""What keeps a presence socket alive through a Redis outage, and cheap per message.

Three overrides of Channels' consumer, each for a reason a test or a benchmark shows:

- ``__call__``: before anything else Channels asks the layer for the socket's channel, and
  channels-redis' pub/sub layer subscribes to it there. With Redis away that raises, which the
  server logs as a traceback and answers with a 500 for every socket a browser opens during the
  outage. Refused cleanly instead: 1013 "try again later" (presence.js backs off and retries).
  Shown by tests/reliability/test_redis_outage.py.
- ``channel_receive``: Channels awaits the layer's receive for every event; unwrapped, an outage
  ends every consumer at once (a traceback and a 1006 per socket). Here the receive is retried
  until Redis is back and the browser told once per outage; the socket stays open and its next
  heartbeat takes its lease and rooms again. Shown by the same test and by
  tests/realtime/test_consumer.py::test_redis_away_gets_unavailable_errors_not_a_crash.
- ``dispatch``: Channels closes stale database connections before every message, a hop to its
  one sync thread each: too dear for every heartbeat and room event (bench/sockets.py). Presence
  touches the database only inside ``database_sync_to_async`` (hooks), which does it itself.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import AsyncConsumer, get_handler_name

from ..failopen import log_outage
from ..store import UNAVAILABLE
from . import protocol
from .subscriptions import release

logger = logging.getLogger("presence_app")

CLOSE_TRY_AGAIN = 1013  # RFC 6455 "Try Again Later": the channel layer cannot be reached
#: Seconds between two tries of the channel layer's receive while Redis is away (first, most).
RECEIVE_RETRY = (0.1, 1.0)


class OutageTolerantConsumer(AsyncConsumer):
    """A consumer that survives Redis outages (see the module's docstring)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except UNAVAILABLE as exc:
            if getattr(self, "channel_name", None) is not None:
                raise  # anything after the subscription is not ours to hide
            log_outage(exc)
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN})
        finally:
            await release(self)

    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict[str, Any]]]:
        return self._receive_event

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self._layer_receive = receive

    async def _receive_event(self) -> dict[str, Any]:
        delay = RECEIVE_RETRY[0]
        while True:
            try:
                self._layer_waiting = True  # cancelled while waiting: the layer lets go
                message = await self._layer_receive()
                self._layer_waiting = False
                return message
            except UNAVAILABLE as exc:
                self._layer_waiting = False
                log_outage(exc)
                session = getattr(self, "presence", None)
                if session is not None and not session.closed and session.outage_notice.ready():
                    await session.send(
                        protocol.error_frame(
                            "unavailable", "Live updates are interrupted. The server is retrying."
                        )
                    )
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, RECEIVE_RETRY[1])

    async def dispatch(self, message: dict[str, Any]) -> None:
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            logger.debug("presence: no handler for %r", message.get("type"))
            return
        await handler(message)
