"""Workspaces: presence partitioned by a tenant key (a site, a workspace, an organization).

Each tenant is a key space of its own: its store's prefix is ``KEY_PREFIX~<tenant>`` and so are
its channel-layer group names (:mod:`presence_app.core.dispatch`). Everything presence keeps — who is
online, rooms, counts, the chart, the sweep's lock — is therefore per tenant, and no read or
event of one tenant can name a key or group of another: isolation by construction, with no
filter to forget. The tenants share the Redis client (one connection pool) and the code.

The current tenant is a context variable: ``with tenants.activate("acme"): presence.online()``.
``PRESENCE["TENANT"]`` (a callable or dotted path, sync or async) maps an HTTP request or a
WebSocket's ASGI scope to a tenant key; :class:`~presence_app.middleware.PresenceMiddleware`
activates it for the request (views, template tags, the JSON API), and
:class:`~presence_app.consumers.PresenceConsumerMixin` fixes it for the socket's session. None is
the default key space (the whole site without ``TENANT``).

The sweeper sweeps every tenant that was used lately: each process records a tenant it serves
in ``<KEY_PREFIX>:tenants`` (a sorted set, at most once per ``MARK_INTERVAL``), and the sweeper
visits the ones recorded within ``ACTIVE_FOR``.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from . import conf
from .core import hooks
from .core.limits import Throttle
from .core.tasks import spawn
from .store import UNAVAILABLE, InvalidInput

#: Tenant keys: ids and slugs (they become part of Redis keys and channel-layer group names).
KEY_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: Separates the site's KEY_PREFIX from the tenant key.
SEPARATOR = "~"
#: How often one process records a tenant it serves (one ZADD per tenant per this many seconds).
MARK_INTERVAL = 60.0
#: The sweeper visits the tenants recorded within this many seconds (far above any lease).
ACTIVE_FOR = 24 * 3600.0

_current: ContextVar[str | None] = ContextVar("presence_tenant", default=None)
_marked = Throttle(MARK_INTERVAL, max_keys=100_000)
_pending: set[asyncio.Task[Any]] = set()


def check(key: Any) -> str | None:
    """``key`` as a tenant key (None: the default space); InvalidInput when it cannot be one."""
    if key is None:
        return None
    key = str(getattr(key, "pk", key))
    if not KEY_PATTERN.fullmatch(key):
        raise InvalidInput("A tenant key is 1 to 64 characters of A-Z, a-z, 0-9, _, . and -.")
    return key


def current() -> str | None:
    """The tenant presence reads and writes in (None: the default space)."""
    return _current.get()


@contextmanager
def activate(key: Any) -> Iterator[str | None]:
    """Presence calls inside the block read and write in tenant ``key``."""
    token = _current.set(check(key))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def in_tenant(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Runs an object's coroutine method in the object's ``tenant``, whichever task calls it: a
    connection's session is called from its consumer's task, the coalescer's flush and the
    channel layer's handlers alike, and each call must reach the session's own key space."""

    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with activate(self.tenant):
            return await method(self, *args, **kwargs)

    return run


def prefix(key: str | None = None) -> str:
    """The key prefix of tenant ``key`` (of the default space for None)."""
    base = str(conf.get("KEY_PREFIX"))
    return base if key is None else f"{base}{SEPARATOR}{key}"


def current_prefix() -> str:
    """The key prefix of the current tenant: stores and group names are built from it."""
    return prefix(_current.get())


def resolve(source: Any) -> str | None:
    """The tenant of a request or an ASGI scope (the ``TENANT`` hook; None without one)."""
    return check(hooks.call("TENANT", source))


async def aresolve(source: Any) -> str | None:
    """:func:`resolve` for async code (a sync hook runs in a thread: it may use the ORM)."""
    return check(await hooks.acall("TENANT", source))


def forget_marks() -> None:
    """Record every tenant again on its next use (the stores were rebuilt: maybe a new Redis)."""
    global _marked
    _marked = Throttle(MARK_INTERVAL, max_keys=100_000)


def mark(store: Any, key: str | None) -> None:
    """Record (sync store of the base prefix) that this process serves ``key``, at most once
    per MARK_INTERVAL."""
    if key is None or not _marked.ready(key):
        return
    try:
        store.record_tenant(key, time.time())
    except UNAVAILABLE:
        _marked.forget(key)  # the call that follows fails open on its own; record it next time


def mark_async(store: Any, key: str | None) -> None:
    """:func:`mark` with an async store: written in the background (callers are sync)."""
    if key is None or not _marked.ready(key):
        return

    async def write() -> None:
        try:
            await store.record_tenant(key, time.time())
        except UNAVAILABLE:
            _marked.forget(key)

    spawn(_pending, write())


async def aactive(store: Any, now: float | None = None) -> list[str]:
    """The tenants recorded within ``ACTIVE_FOR`` (async store of the base prefix)."""
    now = time.time() if now is None else now
    return await store.active_tenants(now - ACTIVE_FOR)
