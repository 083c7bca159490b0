"""The sweep: evicting expired leases (crashed processes, ended graces) and announcing it.

Every ASGI process runs :func:`arun_sweeper` in the background (started by the first WebSocket
it accepts). Each round it tries a non-blocking Redis lock and, when it gets it, sweeps,
publishes the transitions (leave, offline, idle) and records the per-minute online sample. The
lock is *not* released: it expires after ``SWEEP_INTERVAL``, so however many processes run,
the cluster sweeps about once per interval. A lease therefore outlives its owner by at most
``LEASE_TTL`` + ``SWEEP_INTERVAL``.

From sync code (the ``presence sweep [--loop]`` command) use :func:`sweep_once` and
:func:`run_sweeper`; they run the same coroutines in a loop of their own.

Workspaces (:mod:`presence_app.tenants`): each round sweeps the default space and the tenants in
use, at most ``tenants.limit()`` of them (the most recently served; past it a warning), each
inside it, so its flush writes that workspace's ``LastSeen`` rows.
"""

from __future__ import annotations

import asyncio
import random
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .. import conf, presence
from ..core import tenants
from ..core.connection import aclose_async_store, get_async_store, get_store
from ..core.tasks import raise_if_cancelling
from ..failopen import log_outage
from ..store import UNAVAILABLE, Transition

OnSweep = Callable[[list[Transition]], None]
T = TypeVar("T")


async def asweep_once(now: float | None = None, *, force: bool = False) -> list[Transition] | None:
    """One sweep of the default key space and of the tenants used lately (at most
    ``tenants.limit()``), each behind a lock of its own; the transitions it announced, or None
    when other processes swept them all within the last interval (``force`` sweeps anyway:
    sweeping is idempotent, the lock only saves work)."""
    rounds = [await _asweep_space(now, force)]
    for tenant in await tenants.aactive(get_async_store()):
        with tenants.activate(tenant):
            rounds.append(await _asweep_space(now, force))
    swept = [r for r in rounds if r is not None]
    return [t for r in swept for t in r] if swept else None


async def _asweep_space(now: float | None, force: bool) -> list[Transition] | None:
    if not force:
        interval = float(conf.get("SWEEP_INTERVAL"))
        if not await get_async_store().job_lock("sweep", timeout=interval).acquire():
            return None
    transitions = await presence.asweep(now)  # announced: leaves, offlines (LastSeen), idles
    store = get_async_store()
    count = await presence.aonline_count(now=now, viewer=presence.TRUSTED)
    await store.record_sample(count, now if now is not None else await store.server_time())
    await aflush_if_due()
    return transitions


async def aflush_if_due() -> None:
    """Every FLUSH_INTERVAL, one process copies online users' last seen to the database
    (a lock that is never released, like the sweep's, paces the fleet)."""
    interval = float(conf.get("FLUSH_INTERVAL"))
    if await get_async_store().job_lock("flush", timeout=interval).acquire():
        from channels.db import database_sync_to_async

        from .lastseen import flush

        await database_sync_to_async(flush)()


def flush_all(batch: int = 1000, now: float | None = None) -> int:
    """Copies online users' last seen to the database in the default space and in every
    workspace in use, each inside it (its rows take its workspace): for ``presence flush``.
    Returns the rows written."""
    from .lastseen import flush

    written = flush(batch, now)
    with tenants.activate(None):
        keys = tenants.active(get_store())
    for key in keys:
        with tenants.activate(key):
            written += flush(batch, now)
    return written


async def arun_sweeper(
    loop: bool = True, on_sweep: OnSweep | None = None, *, first_delay: float = 0.0
) -> list[Transition] | None:
    """Sweep once, or (``loop``) every ``SWEEP_INTERVAL`` until cancelled. Redis being away is
    logged and retried; ``on_sweep`` gets each round's transitions."""
    await asyncio.sleep(first_delay)
    while True:
        raise_if_cancelling()
        try:
            transitions = await asweep_once()
        except UNAVAILABLE as exc:
            if not loop:
                raise
            log_outage(exc, "the sweep")
            transitions = None
        if transitions is not None and on_sweep is not None:
            on_sweep(transitions)
        if not loop:
            return transitions
        await asyncio.sleep(float(conf.get("SWEEP_INTERVAL")))


_tasks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


def ensure_sweeper() -> asyncio.Task[None]:
    """Start this event loop's background sweeper unless it runs already."""
    loop = asyncio.get_running_loop()
    task = _tasks.get(loop)
    if task is None or task.done():
        # A random first delay spreads the processes of a fleet that started together.
        delay = random.uniform(0, float(conf.get("SWEEP_INTERVAL")))
        task = _tasks[loop] = loop.create_task(arun_sweeper(loop=True, first_delay=delay))
    return task


async def _own_loop(main: Awaitable[T]) -> T:
    try:
        return await main
    finally:
        await aclose_async_store()  # the loop ends here: so does its Redis client


def sweep_once(now: float | None = None, *, force: bool = False) -> list[Transition] | None:
    """:func:`asweep_once` for sync code (no event loop may run in this thread)."""
    return asyncio.run(_own_loop(asweep_once(now, force=force)))


def run_sweeper(loop: bool = False, on_sweep: OnSweep | None = None) -> list[Transition] | None:
    """Sweep once, or forever with ``loop`` (until KeyboardInterrupt): for ``presence sweep``."""
    return asyncio.run(_own_loop(arun_sweeper(loop, on_sweep)))
