"""presence_app.store: the only code that names a Redis key or command.

``Store`` (sync, redis-py) and ``AsyncStore`` (redis.asyncio) share one API and the same Lua
scripts. The store knows nothing of Django or Channels: give it a client and a StoreConfig.
"""

from redis.exceptions import RedisClusterException, RedisError

from .aio import AsyncStore
from .sync import Store
from .types import (
    ONLINE_STATES,
    InvalidInput,
    Presence,
    PresenceError,
    StateCounts,
    StoreConfig,
    Transition,
    UnknownConnection,
)

#: What a store call raises when Redis cannot be reached or answers with an error of its own;
#: entry points catch these to fail open (an error frame, a log line) instead of crashing.
UNAVAILABLE = (RedisError, RedisClusterException, OSError)

__all__ = [
    "ONLINE_STATES",
    "AsyncStore",
    "InvalidInput",
    "Presence",
    "PresenceError",
    "StateCounts",
    "Store",
    "StoreConfig",
    "Transition",
    "UNAVAILABLE",
    "UnknownConnection",
]
