"""The default stores, built from settings: a sync Store and one AsyncStore per event loop.

``PRESENCE["CLUSTER"] = True`` builds redis-py's ``RedisCluster`` (sync) and
``redis.asyncio.RedisCluster`` (async) instead of ``Redis``: ``REDIS_URL`` then names one node
of the cluster, or is a list of node URLs (the startup nodes: any one that answers is enough
to learn the whole cluster). The store itself needs no other change: every script's keys share
one hash tag, so each call goes to one slot.

What redis-py does differently on a cluster, smoothed over here so that the entry points
fail open exactly as on a single Redis:

- a cluster that cannot be reached raises ``RedisClusterException``, which is not a
  ``RedisError``: the clients below raise ``redis.ConnectionError`` instead;
- the sync ``RedisCluster`` connects in its constructor. ``get_store()`` must not raise (callers
  write ``_read(get_store().online_count)`` and fail open inside): while the cluster cannot be
  reached it returns a store whose every call raises ``ConnectionError``, and tries to build
  the real client again ``CLUSTER_RETRY`` seconds later;
- ``redis.asyncio.RedisCluster`` takes no ``retry_on_timeout`` (``REDIS_OPTIONS``' default).

``PRESENCE["SENTINELS"]`` (or the ``SENTINELS`` option of a django-redis cache using its
``SentinelClient``) puts both stores on redis-py's Sentinel support: ``REDIS_URL``'s host is the
service name (``redis://mymaster/0``); each new connection asks the sentinels where the primary
is, and a connection to a demoted or dead primary is dropped, so after a failover the next
calls reach the promoted replica. Calls in flight at the kill fail with ``ConnectionError``,
which the entry points treat as a short outage (fail open, heartbeats retried).

And one thing redis-py 8 does on a single Redis too: an asyncio connection pool holds at most 100
connections and raises ``MaxConnectionsError`` at once past that, so an ASGI process with more
than 100 store calls in flight (a reconnect storm of its sockets) would answer "unavailable".
The async single-Redis client therefore gets a *blocking* pool (a call waits up to
``ASYNC_POOL_TIMEOUT`` for a free connection); the async cluster client, which has no blocking
pool, and the async Sentinel client, whose pool is not blocking either, a higher cap (per node).
``REDIS_OPTIONS["max_connections"]`` overrides the caps.

Each tenant (:mod:`presence_app.tenants`) gets a store of its own prefix on the same client.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
import weakref
from typing import Any
from urllib.parse import urlparse

import redis
import redis.asyncio as aredis
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.exceptions import RedisClusterException
from redis.sentinel import Sentinel

from .. import conf
from ..store import AsyncStore, Store, StoreConfig
from . import tenants

DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Async clients: connections per process (single Redis: the blocking pool's size) and per
#: cluster node and process (redis-py's default is 100 for both, failing past it).
ASYNC_MAX_CONNECTIONS = 100
ASYNC_CLUSTER_MAX_CONNECTIONS = 1000
#: How long an async call waits for a free pooled connection before it fails (ConnectionError).
ASYNC_POOL_TIMEOUT = 10.0
#: Seconds between two attempts to reach a cluster that could not be reached.
CLUSTER_RETRY = 1.0
#: RedisClusterException messages that mean "the cluster cannot be reached" (not a usage error).
_UNREACHABLE = ("Redis Cluster cannot be connected", "All slots are not covered")

_sync: Store | None = None  # the default key space's; the tenants' stores share its client
# The tenants' stores, for the most recently used workspaces only (tenants.limit()).
_tenant_sync: tenants.Bounded[Store] = tenants.Bounded("stores")
_sync_down_until = 0.0  # the sync cluster client could not be built: when to try again
#: Per event loop: its default store, and its tenants' stores (bounded as ``_tenant_sync``).
_async: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, tuple[AsyncStore, tenants.Bounded[AsyncStore]]
] = weakref.WeakKeyDictionary()


def store_config(tenant: str | None = None) -> StoreConfig:
    s = conf.get_settings()
    return StoreConfig(
        prefix=tenants.prefix(tenant),
        shards=int(s["SHARDS"]),
        lease_ttl=float(s["LEASE_TTL"]),
        disconnect_grace=float(s["DISCONNECT_GRACE"]),
        online_window=float(s["ONLINE_WINDOW"]),
        idle_after=float(s["IDLE_AFTER"]),
        metadata_ttl=float(s["METADATA_TTL"]),
        max_metadata_bytes=int(s["MAX_METADATA_BYTES"]),
        max_message_length=int(s["MAX_MESSAGE_LENGTH"]),
        sweep_batch=int(s["SWEEP_BATCH"]),
        registry_buckets=int(s["REGISTRY_BUCKETS"]),
    )


_process: tuple[int, str] = (0, "")


def process_id() -> str:
    """This OS process' id in the store's process leases: one for all its stores (sync, async,
    every loop and tenant), drawn again in a forked child, which is a process of its own."""
    global _process
    if _process[0] != os.getpid():
        _process = (os.getpid(), secrets.token_hex(4))
    return _process[1]


def _store(face: type[Store] | type[AsyncStore], client: Any, tenant: str | None = None) -> Any:
    return face(client, store_config(tenant), process=process_id())


def _cache() -> dict[str, Any]:
    """The django-redis cache REDIS_ALIAS ({} if it is not one)."""
    cache = getattr(settings, "CACHES", {}).get(conf.get("REDIS_ALIAS"), {})
    return cache if "django_redis" in cache.get("BACKEND", "") else {}


def _cache_location() -> str | None:
    """The URL of the django-redis cache REDIS_ALIAS, if there is one."""
    location = _cache().get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0] if location else None
    return location


def redis_urls() -> list[str]:
    """REDIS_URL as a list (a cluster may name several startup nodes), else the cache's URL,
    else the default."""
    url = conf.get("REDIS_URL")
    if isinstance(url, (list, tuple)):
        return [str(u) for u in url] or [DEFAULT_URL]
    return [url or _cache_location() or DEFAULT_URL]


def redis_url() -> str:
    """The (first) URL presence connects to: for messages and checks."""
    return redis_urls()[0]


def sentinels() -> list[tuple[str, int]] | None:
    """The sentinels presence asks for its primary: PRESENCE["SENTINELS"], else (when presence
    shares the django-redis cache's connection) that cache's SENTINELS option; None without."""
    found = conf.get("SENTINELS")
    if not found and not conf.get("REDIS_URL"):
        found = _cache().get("OPTIONS", {}).get("SENTINELS")
    return [(str(host), int(port)) for host, port in found] if found else None


def _sentinel_options() -> dict[str, Any]:
    """Keyword arguments for the connections to the sentinels themselves."""
    if conf.get("SENTINELS"):
        return dict(conf.get("SENTINEL_OPTIONS") or {})
    return dict(_cache().get("OPTIONS", {}).get("SENTINEL_KWARGS") or conf.get("SENTINEL_OPTIONS"))


def _service(url: str) -> tuple[str, dict[str, Any]]:
    """A Sentinel URL's service name (its host) and the primary's connection arguments."""
    parsed = urlparse(url)
    target: dict[str, Any] = {"db": int(parsed.path.strip("/") or 0)}
    if parsed.username:
        target["username"] = parsed.username
    if parsed.password:
        target["password"] = parsed.password
    if parsed.scheme == "rediss":
        target["ssl"] = True
    return parsed.hostname or "mymaster", target


def _sentinel_client(
    manager: type[Any], found: list[tuple[str, int]], options: dict[str, Any]
) -> Any:
    """The primary of the Sentinel service named by REDIS_URL, through ``manager`` (redis-py's
    sync or asyncio ``Sentinel``) asking the sentinels ``found``."""
    service, target = _service(redis_url())
    return manager(found, sentinel_kwargs=_sentinel_options()).master_for(
        service, **{**options, **target}
    )


def _unreachable(exc: RedisClusterException) -> Exception:
    if str(exc).startswith(_UNREACHABLE):
        error = redis.ConnectionError(str(exc))
        error.__cause__ = exc
        return error
    return exc


class _SyncCluster(redis.RedisCluster):
    """RedisCluster whose "cannot reach the cluster" is a ConnectionError (a RedisError)."""

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().execute_command(*args, **kwargs)
        except RedisClusterException as exc:
            raise _unreachable(exc) from exc


#: How a write on a connection closed under its feet fails: asyncio's stream gone, its transport
#: closed as it wrote, or uvloop's transport closed.
_CLOSED_UNDERFOOT = (
    "'NoneType' object has no attribute",
    "'NoneType' object is not callable",
    "the handler is closed",
)


class _AsyncCluster(aredis.RedisCluster):
    """The async twin of _SyncCluster (it connects lazily, on the first command or pipeline)."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except RedisClusterException as exc:
            raise _unreachable(exc) from exc
        except (AttributeError, RuntimeError, TypeError) as exc:
            # redis-py's race at a failover: a call that finds its node dead makes the client
            # relearn the topology and disconnect that node's connections, under the feet of
            # calls running concurrently on them. The write then fails on a connection with no
            # stream ("'NoneType' object has no attribute 'writelines'") or, under uvloop, on a
            # closed transport ("... the handler is closed"). That is a lost connection, not a
            # bug of the caller.
            if not any(sign in str(exc) for sign in _CLOSED_UNDERFOOT):
                raise
            raise redis.ConnectionError(f"connection closed by a topology refresh: {exc}") from exc

    async def initialize(self, *args: Any, **kwargs: Any) -> Any:
        try:  # also reached from a cluster pipeline's execute()
            return await super().initialize(*args, **kwargs)
        except RedisClusterException as exc:
            raise _unreachable(exc) from exc


class _ClusterDown(_SyncCluster):
    """Stands for a sync cluster client that could not be built: every use raises the
    ConnectionError it failed with (it passes for a RedisCluster, so the store takes it)."""

    def __init__(self, error: Exception) -> None:  # no super().__init__: nothing to connect
        object.__setattr__(self, "_error", error)

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") or name == "_error":
            return object.__getattribute__(self, name)
        error = object.__getattribute__(self, "_error")
        raise redis.ConnectionError(str(error)) from error

    def __del__(self) -> None:
        pass


def _startup_nodes(node_class: Any, urls: list[str]) -> list[Any]:
    nodes = []
    for url in urls:
        parsed = urlparse(url)
        nodes.append(node_class(parsed.hostname or "127.0.0.1", parsed.port or 6379))
    return nodes


def cluster_options(options: dict[str, Any], *, asynchronous: bool) -> dict[str, Any]:
    """REDIS_OPTIONS as the (sync or async) RedisCluster constructor takes them."""
    out = dict(options)
    if asynchronous:
        # The async cluster client retries on the cluster level and has no retry_on_timeout:
        # True becomes a TimeoutError among the errors it retries on, False needs nothing.
        if out.pop("retry_on_timeout", False):
            out["retry_on_error"] = [*out.get("retry_on_error", []), redis.TimeoutError]
        out.setdefault("max_connections", ASYNC_CLUSTER_MAX_CONNECTIONS)
    return out


def _sync_client() -> Any:
    s = conf.get_settings()
    if s["CLUSTER"]:
        first, *others = redis_urls()
        options = cluster_options(s["REDIS_OPTIONS"], asynchronous=False)
        if others:
            options["startup_nodes"] = _startup_nodes(redis.cluster.ClusterNode, others)
        try:  # the sync client learns the cluster's slots here, at once
            return _SyncCluster.from_url(first, **options)
        except RedisClusterException as exc:
            raise _unreachable(exc) from exc
    if not s["REDIS_URL"] and _cache_location():
        from django_redis import get_redis_connection

        # django-redis' own client, Sentinel-aware when the cache uses its SentinelClient.
        return get_redis_connection(s["REDIS_ALIAS"])
    if found := sentinels():
        return _sentinel_client(Sentinel, found, dict(s["REDIS_OPTIONS"]))
    return redis.Redis.from_url(redis_url(), **s["REDIS_OPTIONS"])


def _async_client() -> Any:
    s = conf.get_settings()
    if s["CLUSTER"]:
        first, *others = redis_urls()
        options = cluster_options(s["REDIS_OPTIONS"], asynchronous=True)
        if others:
            options["startup_nodes"] = _startup_nodes(aredis.cluster.ClusterNode, others)
        return _AsyncCluster.from_url(first, **options)
    options = dict(s["REDIS_OPTIONS"])
    if found := sentinels():  # redis-py's async Sentinel pool does not block: a higher cap
        options.setdefault("max_connections", ASYNC_CLUSTER_MAX_CONNECTIONS)
        return _sentinel_client(AsyncSentinel, found, options)
    options.setdefault("max_connections", ASYNC_MAX_CONNECTIONS)
    pool = aredis.BlockingConnectionPool.from_url(
        redis_url(), timeout=ASYNC_POOL_TIMEOUT, **options
    )
    return aredis.Redis.from_pool(pool)  # closing the client closes its pool


def get_store() -> Store:
    """The process' synchronous store of the current tenant (never raises for an unreachable
    Redis: its calls do)."""
    global _sync, _sync_down_until
    if _sync is None or (_sync_down_until and time.monotonic() >= _sync_down_until):
        try:
            client, _sync_down_until = _sync_client(), 0.0
        except redis.ConnectionError as exc:  # only the cluster client connects at once
            client, _sync_down_until = _ClusterDown(exc), time.monotonic() + CLUSTER_RETRY
        _sync = _store(Store, client)
        _tenant_sync.clear()
    tenant = tenants.current()
    if tenant is None:
        return _sync
    client = _sync.client
    store = _tenant_sync.get(tenant, lambda: _store(Store, client, tenant))
    tenants.mark(_sync, tenant)  # the registry is the base prefix's
    return store


def get_async_store() -> AsyncStore:
    """The async store of the running event loop (redis.asyncio clients belong to one loop)
    and of the current tenant."""
    loop = asyncio.get_running_loop()
    stores = _async.get(loop)
    if stores is None:
        stores = _async[loop] = (_store(AsyncStore, _async_client()), tenants.Bounded("stores"))
    default, of_tenants = stores
    tenant = tenants.current()
    if tenant is None:
        return default
    tenants.mark_in_background(default, tenant)
    return of_tenants.get(tenant, lambda: _store(AsyncStore, default.client, tenant))


async def aclose_async_store() -> None:
    """Close and forget the running loop's stores (for short-lived loops: asyncio.run)."""
    stores = _async.pop(asyncio.get_running_loop(), None)
    if stores is not None:
        await stores[0].aclose()  # the tenants' stores share its client


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting in ("PRESENCE", "CACHES"):
        reset_stores()


def reset_stores() -> None:
    """Forget the stores (settings changed); the next call builds new ones."""
    global _sync, _sync_down_until
    _sync, _sync_down_until = None, 0.0
    _tenant_sync.clear()
    _async.clear()
    tenants.forget_marks()
