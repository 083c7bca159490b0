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

The database rows of presence (``LastSeen``, ``RoomMembership``, ``LastSeenPrivacy``) carry the
workspace too, as a column (:func:`column`: the key, "" for the default space) that is part of
each row's unique constraint; their default manager reads and writes the current workspace's rows
only, and code that must see every workspace (erasure, export) says so
(``Model.all_workspaces``). :func:`everywhere` lists where one user may have something:
erasure and export visit each of them.

The sweeper sweeps every tenant that was used lately: each process records a tenant it serves
in ``<KEY_PREFIX>:tenants`` (a sorted set, at most once per ``MARK_INTERVAL``), and the sweeper
visits the ones recorded within ``ACTIVE_FOR``.

How many workspaces one process serves is bounded: :func:`limit` (``MAX_TENANTS``, 1,000 by
default). The sweeper visits the ``limit()`` most recently served, the marks remember as many,
and :class:`Bounded` keeps per-workspace objects (a process' stores) for the ``limit()`` most
recently used; past it a warning says so. The bound is a safety net, not a licence: ``TENANT``
must map to workspaces the site created, never to a value a client chose (an unregistered
subdomain, a header, a query string), or anyone can make up workspaces.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from .. import conf
from ..store import UNAVAILABLE, InvalidInput
from . import hooks
from .limits import Throttle
from .tasks import spawn

#: Tenant keys: ids and slugs (they become part of Redis keys and channel-layer group names).
KEY_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: Separates the site's KEY_PREFIX from the tenant key.
SEPARATOR = "~"
#: How often one process records a tenant it serves (one ZADD per tenant per this many seconds).
MARK_INTERVAL = 60.0
#: The sweeper visits the tenants recorded within this many seconds (far above any lease).
ACTIVE_FOR = 24 * 3600.0
#: How many workspaces one process serves at most, without a ``MAX_TENANTS`` setting.
MAX_TENANTS = 1000
#: One warning per this many seconds when more workspaces are in use than :func:`limit`.
WARN_EVERY = 600.0

logger = logging.getLogger("presence_app")
V = TypeVar("V")

_current: ContextVar[str | None] = ContextVar("presence_tenant", default=None)
_marked: Throttle | None = None  # made on first use: its size is a setting
_pending: set[asyncio.Task[Any]] = set()
_warned = Throttle(WARN_EVERY)


def limit() -> int:
    """How many workspaces one process serves at most (``MAX_TENANTS``)."""
    return max(1, int(conf.get_settings().get("MAX_TENANTS", MAX_TENANTS)))


def _too_many(what: str, count: int) -> None:
    if _warned.ready(what):
        logger.warning(
            "presence: %s: %d workspaces, more than MAX_TENANTS (%d); only the %d most recently "
            "used are kept. Raise MAX_TENANTS if the site has that many workspaces, or check "
            "that TENANT maps requests only to workspaces the site created.",
            what,
            count,
            limit(),
            limit(),
        )


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


def column() -> str:
    """The current workspace as the database rows hold it: its key, "" for the default space
    (the default of every presence model's ``workspace`` column)."""
    return _current.get() or ""


def from_column(value: str) -> str | None:
    """A ``workspace`` column's value as a tenant key (None for the default space)."""
    return value or None


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
    _marked = None


def _marks() -> Throttle:
    """Which tenants this process recorded lately: as many as it serves (:func:`limit`)."""
    global _marked
    if _marked is None:
        _marked = Throttle(MARK_INTERVAL, max_keys=limit())
    return _marked


def mark(store: Any, key: str | None) -> None:
    """Record (sync store of the base prefix) that this process serves ``key``, at most once
    per MARK_INTERVAL."""
    marks = _marks()
    if key is None or not marks.ready(key):
        return
    try:
        store.record_tenant(key, time.time())
    except UNAVAILABLE:
        marks.forget(key)  # the call that follows fails open on its own; record it next time


def mark_in_background(store: Any, key: str | None) -> None:
    """:func:`mark` with an async store: written in the background (callers are sync)."""
    marks = _marks()
    if key is None or not marks.ready(key):
        return

    async def write() -> None:
        try:
            await store.record_tenant(key, time.time())
        except UNAVAILABLE:
            marks.forget(key)

    spawn(_pending, write())


def _recent(keys: list[str]) -> list[str]:
    """The :func:`limit` most recently served of ``keys`` (the registry's order: oldest first)."""
    if len(keys) > limit():
        _too_many("tenants in use", len(keys))
        keys = keys[-limit() :]
    return keys


def active(store: Any, now: float | None = None) -> list[str]:
    """The tenants recorded within ``ACTIVE_FOR``, at most :func:`limit` of them, the most
    recently served (sync store of the base prefix)."""
    now = time.time() if now is None else now
    return _recent(store.active_tenants(now - ACTIVE_FOR))


async def aactive(store: Any, now: float | None = None) -> list[str]:
    """:func:`active` with the async store of the base prefix (what the sweeper visits)."""
    now = time.time() if now is None else now
    return _recent(await store.active_tenants(now - ACTIVE_FOR))


class Bounded(Generic[V]):
    """Per-workspace objects of one process (its stores, say) for the :func:`limit` most
    recently used workspaces: past it the least recently used is dropped (and made again on
    its next use), with a warning. Thread-safe."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The object of ``key``, made by ``make()`` on first use."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        made = make()
        with self._lock:
            found = self._items.setdefault(key, made)
            self._items.move_to_end(key)
            while len(self._items) > limit():
                self._items.popitem(last=False)
                _too_many(self.what, len(self._items) + 1)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items


def everywhere(rows: Iterable[str | None], live: Iterable[str]) -> list[str | None]:
    """The workspaces that may hold something of one user: the default space, the current one,
    those their database rows name (``rows``) and those in use lately (``live``: Redis may know
    the user there before any row does). The default space first."""
    keys = {None, current(), *rows, *live}
    return sorted(keys, key=lambda k: (k is not None, k or ""))
