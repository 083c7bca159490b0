"""presence_app.store: the only code that names a Redis key or command.

``Store`` (sync, redis-py) and ``AsyncStore`` (redis.asyncio) share one API and the same Lua
scripts. The store knows nothing of Django or Channels: give it a client and a StoreConfig.
"""

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
    "UnknownConnection",
]
