"""Background tasks of the app's own: one a connection starts and keeps, a process's batch of
writes, and the check that stops a retrying loop whose cancellation got lost."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


class Batch:
    """Pending writes of one event loop's connections, keyed so that a later one replaces an
    earlier one, written by one task: it flushes what is pending (with ``at_once``, the
    first write of a quiet batch at once; else a round later), sleeps :meth:`wait`, and ends
    after ``idle`` quiet rounds (unless :meth:`holding`), only with
    nothing pending and no sleep left: a write put during its last sleep is flushed, and one
    put after it finds the task done and starts another. Subclasses say what a flush writes
    and how long a round is (the heartbeats' interval, the room states' wall-clock ticks), and
    may flush with nothing pending (:meth:`due`: the heartbeats' keepalive).

    ``jobs.touches.TouchBatcher`` is of the same idea but a thread: a WSGI site's requests have
    no event loop to run this task on."""

    #: Quiet rounds after which the task ends (the next write starts a new one).
    idle = 30
    #: Is the first write of a quiet batch flushed at once (or gathered for a round)?
    at_once = True

    def __init__(self) -> None:
        self.pending: dict[Any, Any] = {}
        self.task: asyncio.Task[None] | None = None
        self.flushes = 0  # script calls made (tests count them)

    def wake(self) -> None:
        """Something was put in ``pending``: the task writes it, started if none runs."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        quiet, last = 0, -1e9
        if not self.at_once:
            await asyncio.sleep(max(0.0, self.wait(last)))
        while True:
            raise_if_cancelling()
            if self.due():
                quiet, last = 0, time.time()
                await self.flush()
            elif quiet >= self.idle and not self.holding():
                return
            else:
                quiet += 1
            await asyncio.sleep(max(0.0, self.wait(last)))

    def due(self) -> bool:
        """Is there something to flush this round? (What is pending, by default.)"""
        return bool(self.pending)

    def holding(self) -> bool:
        """Must the task run on through quiet rounds? (A subclass's own reason.)"""
        return False

    def wait(self, last: float) -> float:
        """Seconds until the next round, the last flush having started at ``last``."""
        raise NotImplementedError

    async def flush(self) -> None:
        """Writes what is pending and empties it."""
        raise NotImplementedError
