"""The store's housekeeping beside presence itself: job locks, the per-minute samples of the
dashboard's chart, the server clock, a health check and a full clear. Used by the sweeper, the
``presence`` command and the system checks; presence state itself goes through
:mod:`presence_app.presence`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core.connection import aclose_async_store, get_async_store, get_store
from .store import upgrade_from_v1 as store_upgrade_from_v1


def job_lock(job: str, timeout: float) -> Any:
    """A non-blocking Redis lock, so that one process at a time runs ``job`` (sync)."""
    return get_store().job_lock(job, timeout=timeout)


def async_job_lock(job: str, timeout: float) -> Any:
    """:func:`job_lock` for async code (``await lock.acquire()``)."""
    return get_async_store().job_lock(job, timeout=timeout)


async def arecord_sample(count: int, now: float | None = None) -> None:
    """Keeps ``count`` as the online sample of the current minute (Redis' clock by default)."""
    store = get_async_store()
    await store.record_sample(count, now if now is not None else await store.server_time())


def redis_client() -> Any:
    """The presence Redis' client (a cluster client on a cluster): for INFO in the checks."""
    return get_store().client


async def aactive_tenants() -> list[str]:
    """The tenant keys some process served within the last day (the sweeper visits each)."""
    from . import tenants

    return await tenants.aactive(get_async_store())


def ping() -> bool:
    """True when the presence Redis answers."""
    return get_store().ping()


async def aclose() -> None:
    """Closes this event loop's Redis client (a loop that ends: a command's own loop)."""
    await aclose_async_store()


def upgrade_from_v1(
    save: Callable[[list[tuple[str, float, str]]], None], *, force: bool = False
) -> int:
    """Carries users from the store's layout 1 to layout 2 (``presence upgrade``); ``save``
    gets their last seens before layout 1 is dropped. Returns how many were carried."""
    return store_upgrade_from_v1(get_store(), save, force=force)


def clear() -> int:
    """Deletes every presence key of this prefix; returns how many."""
    return get_store().clear()
