"""presence_app.store: the only code that names a Redis key or command.

``Store`` (sync, redis-py) and ``AsyncStore`` (redis.asyncio) share one API and the same Lua
scripts. The store knows nothing of Django or Channels: give it a client and a StoreConfig.
"""

from redis import exceptions as rx

from .aio import AsyncStore
from .base import BaseStore
from .inputs import UserIds
from .sync import Store
from .types import (
    CONTROL_CHARACTERS,
    MAX_DEVICE_LENGTH,
    ONLINE_STATES,
    InvalidInput,
    Presence,
    PresenceError,
    StateCounts,
    StoreConfig,
    TooManyConnections,
    Transition,
    UnknownConnection,
    is_text,
)

#: What a store call raises when Redis is away or cannot serve right now: unreachable, timing
#: out, loading, out of memory, a read-only replica after a failover, a cluster without its
#: slot. Entry points catch these to fail open (an error frame, a log line). Any other Redis
#: error (a script error, a wrong type, a bad argument) is a bug, and is let through.
UNAVAILABLE: tuple[type[BaseException], ...] = (
    rx.ConnectionError,
    rx.TimeoutError,
    rx.OutOfMemoryError,
    rx.ReadOnlyError,
    rx.ClusterDownError,
    rx.TryAgainError,
    rx.RedisClusterException,
    OSError,
)

__all__ = [
    "CONTROL_CHARACTERS",
    "MAX_DEVICE_LENGTH",
    "ONLINE_STATES",
    "AsyncStore",
    "BaseStore",
    "InvalidInput",
    "Presence",
    "PresenceError",
    "StateCounts",
    "Store",
    "StoreConfig",
    "TooManyConnections",
    "Transition",
    "UNAVAILABLE",
    "UnknownConnection",
    "UserIds",
    "is_text",
]
