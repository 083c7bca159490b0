"""The default stores, built from settings: a sync Store and one AsyncStore per event loop."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio as aredis
from django.conf import settings

from . import conf
from .store import AsyncStore, Store, StoreConfig

DEFAULT_URL = "redis://127.0.0.1:6379/0"

_sync: Store | None = None
_async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncStore] = weakref.WeakKeyDictionary()


def store_config() -> StoreConfig:
    s = conf.get_settings()
    return StoreConfig(
        prefix=s["KEY_PREFIX"],
        shards=int(s["SHARDS"]),
        lease_ttl=float(s["LEASE_TTL"]),
        disconnect_grace=float(s["DISCONNECT_GRACE"]),
        online_window=float(s["ONLINE_WINDOW"]),
        idle_after=float(s["IDLE_AFTER"]),
        metadata_ttl=float(s["METADATA_TTL"]),
        max_metadata_bytes=int(s["MAX_METADATA_BYTES"]),
        max_message_length=int(s["MAX_MESSAGE_LENGTH"]),
        sweep_batch=int(s["SWEEP_BATCH"]),
    )


def _cache_location() -> str | None:
    """The URL of the django-redis cache REDIS_ALIAS, if there is one."""
    cache = getattr(settings, "CACHES", {}).get(conf.get("REDIS_ALIAS"), {})
    if "django_redis" not in cache.get("BACKEND", ""):
        return None
    location = cache.get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0] if location else None
    return location


def redis_url() -> str:
    return conf.get("REDIS_URL") or _cache_location() or DEFAULT_URL


def _sync_client() -> Any:
    s = conf.get_settings()
    if s["CLUSTER"]:
        return redis.RedisCluster.from_url(redis_url(), **s["REDIS_OPTIONS"])
    if not s["REDIS_URL"] and _cache_location():
        from django_redis import get_redis_connection

        return get_redis_connection(s["REDIS_ALIAS"])
    return redis.Redis.from_url(redis_url(), **s["REDIS_OPTIONS"])


def _async_client() -> Any:
    s = conf.get_settings()
    cls = aredis.RedisCluster if s["CLUSTER"] else aredis.Redis
    return cls.from_url(redis_url(), **s["REDIS_OPTIONS"])


def get_store() -> Store:
    """The process' synchronous store."""
    global _sync
    if _sync is None:
        _sync = Store(_sync_client(), store_config())
    return _sync


def get_async_store() -> AsyncStore:
    """The async store of the running event loop (redis.asyncio clients belong to one loop)."""
    loop = asyncio.get_running_loop()
    store = _async.get(loop)
    if store is None:
        store = _async[loop] = AsyncStore(_async_client(), store_config())
    return store


async def aclose_async_store() -> None:
    """Close and forget the running loop's store (for short-lived loops: asyncio.run)."""
    store = _async.pop(asyncio.get_running_loop(), None)
    if store is not None:
        await store.aclose()


def reset_stores() -> None:
    """Forget the stores (settings changed); the next call builds new ones."""
    global _sync
    _sync = None
    _async.clear()
