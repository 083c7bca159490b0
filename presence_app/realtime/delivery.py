"""A connection's frames, in order, without holding up whoever hands them over.

A room's feed (:mod:`presence_app.realtime.feeds`) hands one encoded frame to each of its
process's sockets in the room, one after the other. A socket's send nearly always completes at
once (the ASGI server writes to its transport and returns); one whose client reads slowly
waits for its buffer to drain, and must hold up neither the room nor the others. So a frame is
sent *eagerly*: its send runs at once, up to its first wait (:func:`start`); only a send that
does wait gets a task, and that connection's next frames queue behind it (:class:`Writer`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any

logger = logging.getLogger("presence_app")

#: Frames a connection may have queued behind a send that waits; past that it drops them (a
#: socket that reads nothing for so long is stale, and its liveness or the next snapshot ends it).
MAX_BACKLOG = 1000

SendFrame = Callable[[dict[str, Any]], Awaitable[None]]
SendText = Callable[[str], Awaitable[None]]


class _Pass:
    """Hands what a started coroutine waits on (a future, or None for a bare yield) to the task
    that finishes it, as the coroutine itself would have."""

    __slots__ = ("waiting",)

    def __init__(self, waiting: Any) -> None:
        self.waiting = waiting

    def __await__(self) -> Generator[Any, None, None]:
        yield self.waiting


async def _finish(coro: Coroutine[Any, Any, None], waiting: Any) -> None:
    """Drives ``coro`` on from its first wait, inside a task: every resumption (a result, an
    exception, a cancel) goes to it as it would have."""
    while True:
        try:
            await _Pass(waiting)
        except BaseException as exc:  # noqa: BLE001 - handed to coro, which decides
            try:
                waiting = coro.throw(exc)
            except StopIteration:
                return
            continue
        try:
            waiting = coro.send(None)
        except StopIteration:
            return


def start(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Runs ``coro`` now, up to its first wait: None if it ended there (no task made), else the
    task that finishes it. An error raised before its first wait is raised here."""
    try:
        waiting = coro.send(None)
    except StopIteration:
        return None
    task = asyncio.get_running_loop().create_task(_finish(coro, waiting))
    # cancelled before its first step, the task never reached coro: closed, its cleanup runs
    task.add_done_callback(lambda t: coro.close() if t.cancelled() else None)
    return task


class Writer:
    """One connection's way out: frames handed over by :meth:`put` (encoded once for many
    sockets: ``text``, when the transport takes text) and the connection's own by :meth:`send`,
    all in the order given."""

    def __init__(self, send: SendFrame, send_text: SendText | None = None) -> None:
        self.send_frame: SendFrame | None = send
        self.send_text = send_text
        self.busy: asyncio.Future[None] | None = None  # a send on its way, which others follow
        self.backlog: deque[tuple[dict[str, Any], str | None]] = deque()
        self.dropped = 0

    def put(self, frame: dict[str, Any], text: str | None = None) -> None:
        """Sends ``frame`` (as ``text`` if given and the transport takes text), at once when
        nothing is on its way; never waits. ``frame`` is shared: nobody may change it."""
        if self.busy is not None:
            if len(self.backlog) < MAX_BACKLOG:
                self.backlog.append((frame, text))
            else:
                self.dropped += 1
            return
        if self.send_frame is None:
            return  # closed
        if text is not None and self.send_text is not None:
            coro = self.send_text(text)
        else:
            coro = self.send_frame(frame)
        try:
            task = start(coro)  # type: ignore[arg-type]
        except Exception:
            logger.exception("presence: a frame could not be sent")
            return
        if task is not None:
            self.busy = task
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("presence: a frame could not be sent", exc_info=task.exception())
        self.busy = None
        while self.backlog and self.busy is None:
            self.put(*self.backlog.popleft())

    async def send(self, frame: dict[str, Any], text: str | None = None) -> None:
        """The connection's own frame (a snapshot, a reply), after every frame handed over
        before it; what comes meanwhile follows it. ``text``: the frame encoded already (a
        snapshot's page shared by several joiners), sent as such if the transport takes text.
        Raises what the transport raises."""
        while self.busy is not None:
            await asyncio.wait([self.busy])
        if self.send_frame is None:
            return
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.busy = mine
        try:
            if text is not None and self.send_text is not None:
                await self.send_text(text)
            else:
                await self.send_frame(frame)
        finally:
            mine.set_result(None)
            self._done(mine)

    def close(self) -> None:
        """Nothing more goes out; the transport's methods are let go (they hold the session:
        a cycle)."""
        self.send_frame = self.send_text = None
        self.backlog.clear()
