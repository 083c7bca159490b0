"""Background tasks of the app's own: one a connection starts and keeps, and the check that
stops a retrying loop whose cancellation got lost."""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

logger = logging.getLogger("presence_app")
T = TypeVar("T")


def spawn(tasks: set[asyncio.Task[None]], coro: Awaitable[None]) -> None:
    """Runs ``coro`` in the background, kept in ``tasks`` until it ends (so it can be cancelled);
    nobody awaits it, so an error is logged here, not at garbage collection."""

    async def logged() -> None:
        try:
            await coro
        except Exception:
            logger.exception("presence: a background task of a connection failed")

    def done(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        # cancelled before its first step (its connection closing), the task never awaited
        # ``coro``: close it, or Python warns that it was never awaited (a no-op otherwise)
        if inspect.iscoroutine(coro):
            coro.close()

    task = asyncio.ensure_future(logged())
    tasks.add(task)
    task.add_done_callback(done)


def raise_if_cancelling() -> None:
    """Stop a background loop whose cancellation got lost on the way: on Python 3.11 a cancel
    that races a redis-py read timeout, or a sync signal receiver's thread, can be absorbed,
    and a loop that retries on errors would then run on forever."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def per_loop(make: Callable[[], T]) -> Callable[[], T]:
    """A getter of one ``make()`` per running event loop: one per process under an ASGI
    server, one per test's loop, dropped with its loop."""
    made: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get() -> T:
        loop = asyncio.get_running_loop()
        found = made.get(loop)
        if found is None:
            found = made[loop] = make()
        return found

    return get
