"""The channel-layer groups one connection listens to: its user's own group, its rooms' (the
project's own events to a room; presence's reach a process once, through its room feeds:
:mod:`presence_app.realtime.feeds`) and its watched users'. Joining and leaving them is bounded (a watch list of 500 is 500 group_adds,
each on a pooled Redis connection) and refreshed before channels-redis forgets them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Iterable
from typing import Any

from ..core import dispatch
from ..failopen import log_outage
from ..store import ONLINE_STATES, UNAVAILABLE

logger = logging.getLogger("presence_app")

#: Channel-layer calls one connection makes at once: redis-py's pool fails past its size.
CALLS_AT_ONCE = 16


async def let_go(layer: Any, channel: str) -> None:
    """Ends this process' hold on ``channel``: channels-redis' pub/sub layer unsubscribes a
    channel (from ``new_channel``) only when a receive on it is cancelled while it waits. A
    receive that finds a message waiting returns it instead, and the channel is still held:
    then again."""
    for _ in range(100):  # bounded: at most as many messages as were waiting
        pending = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0)
        pending.cancel()
        try:
            await pending
        except asyncio.CancelledError:
            return
        except UNAVAILABLE:
            return


async def release(consumer: Any) -> None:
    """Lets go of ``consumer``'s channel once its connection has ended. Channels cancels the
    layer's receive when the socket ends, which lets the channel go; but an event that had just
    ended that receive left nothing to cancel, and the channel stayed subscribed
    (tests/reliability/test_soak_findings.py). A consumer that tracks its receive
    (``_layer_waiting``, resilience.OutageTolerantConsumer) skips the call when the cancel did
    it; any other pays a subscribe and an unsubscribe."""
    if getattr(consumer, "channel_name", None) is None or consumer.__dict__.get("_released"):
        return
    consumer._released = True
    if not getattr(consumer, "_layer_waiting", False):
        await let_go(consumer.channel_layer, consumer.channel_name)


async def _bounded(calls: list[Awaitable[Any]]) -> list[Any]:
    """The results (or exceptions) of ``calls``, at most CALLS_AT_ONCE running at once."""
    gate = asyncio.Semaphore(CALLS_AT_ONCE)

    async def one(call: Awaitable[Any]) -> Any:
        async with gate:
            return await call

    return await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)


class Subscriptions:
    """Group membership of the channel ``channel_name`` on ``layer``."""

    def __init__(self, layer: Any, channel_name: str, user_id: str) -> None:
        self.layer = layer
        self.channel_name = channel_name
        self.user_id = user_id
        # channels-redis forgets group members after group_expiry: re-add before that.
        self.refresh_every = float(getattr(layer, "group_expiry", 86400)) / 2
        self.refreshed_at = 0.0

    def all(self, rooms: Iterable[str], watched: Iterable[str]) -> list[str]:
        return (
            [dispatch.self_group(self.user_id)]
            + [dispatch.sockets_group(r) for r in rooms]
            + [dispatch.watchers_group(u) for u in watched]
        )

    async def add_all(self, rooms: Iterable[str], watched: Iterable[str]) -> None:
        self.refreshed_at = asyncio.get_running_loop().time()
        await self.add(self.all(rooms, watched))

    def due(self) -> bool:
        """Time to add every group again (before the layer's group_expiry)?"""
        return asyncio.get_running_loop().time() - self.refreshed_at > self.refresh_every

    async def add(self, groups: list[str]) -> None:
        for result in await _bounded([self.layer.group_add(g, self.channel_name) for g in groups]):
            if isinstance(result, BaseException):
                raise result

    async def discard(self, groups: list[str]) -> None:
        results = await _bounded([self.layer.group_discard(g, self.channel_name) for g in groups])
        for result in results:
            if isinstance(result, UNAVAILABLE):
                log_outage(result)  # a stale member costs a dropped message, and expires
            elif isinstance(result, BaseException):
                raise result


class RecentUpdates:
    """The updates a connection relayed lately: the same update reaches a socket once per group
    it came through (the user's watchers, each room shared with them); the browser gets one."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self.seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()

    def first_time(self, event: dict[str, Any]) -> bool:
        """True the first time this update (user, moment, state and texts) comes by."""
        key = tuple(event.get(k) for k in ("user", "at", "state", "message", "emoji"))
        if key in self.seen:
            return False
        self.seen[key] = None
        if len(self.seen) > self.size:
            self.seen.popitem(last=False)
        return True


class Hidden:
    """The users this connection knows to be offline (an invisible user reads so to others):
    their typing and room states are dropped on arrival, whatever their sending connection
    believed (it may not have heard of the change yet). Learned from the events and snapshots
    the connection receives, forgotten when they show online again; the ``size`` most recent
    are kept."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self.users: OrderedDict[str, None] = OrderedDict()

    def learn(self, user_id: Any, state: Any) -> None:
        """``user_id`` was seen in ``state`` (an event's, a snapshot's)."""
        uid = str(user_id)
        if state == "offline":
            self.users[uid] = None
            self.users.move_to_end(uid)
            if len(self.users) > self.size:
                self.users.popitem(last=False)
        elif state in ONLINE_STATES:
            self.users.pop(uid, None)

    def __contains__(self, user_id: object) -> bool:
        return str(user_id) in self.users
