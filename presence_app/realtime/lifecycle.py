"""What an SSE stream's long life costs its process, and how it ends with the server.

- Memory: Django serves each ASGI request on a thread of its own, kept until the response ends;
  a stream lets it go as it starts (:func:`leave_request_thread`).
- Shutdown: a server's graceful shutdown waits for every response to finish, and a stream never
  does; the open streams end at once when the process is told to stop (:func:`track`,
  :func:`chain_shutdown_signals`, :func:`end_streams`), and their browsers reconnect to a live
  process and resume within the grace.
- Its end, for the REST calls that name it: :func:`stream_ended` tells at once that a stream of
  this process has ended, so a call to it is answered now, not after a reply's timeout.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import weakref
from collections import OrderedDict
from contextlib import suppress
from typing import Any

from asgiref.sync import SyncToAsync
from django.db import connections


# -- the request's thread -----------------------------------------------------------------------
def leave_request_thread() -> None:
    """Lets the request's own thread go for the stream's life. Django runs each ASGI request in
    a ``ThreadSensitiveContext``: its middleware's sync parts and the session's load run on a
    thread of the request's own, kept (with the database connection it opened) until the
    response ends, which for a stream is its whole life: most of what a stream cost beyond a
    socket (docs/benchmarks.md, row 11). That thread closes its connections and ends; the
    stream's later sync calls (hooks, the permanent rooms' query) run where a WebSocket's do,
    on the process' shared thread. Django's close of the response, after the stream, gets a
    thread for that moment."""
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    SyncToAsync.thread_sensitive_context.set(None)  # type: ignore[arg-type]  # this task's
    if executor is not None:
        executor.submit(_close_own_connections)  # in their thread: they are thread-bound
        executor.shutdown(wait=False)


def _close_own_connections() -> None:
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:  # a test's transaction is not ours to end
            conn.close()


# -- the server's shutdown ----------------------------------------------------------------------
#: This process' open streams, ended at once when the server is told to stop.
_open_streams: weakref.WeakSet[Any] = weakref.WeakSet()
_signals_chained = False
#: This process' streams by channel (kept weakly), and the channels of the ones that ended
#: (the most recent ENDED_KEPT): a REST call to an ended stream is answered at once.
_by_channel: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_ended: OrderedDict[str, None] = OrderedDict()
ENDED_KEPT = 4096


def end_streams() -> int:
    """Ends every open stream of this process now; returns how many. Each lease gets its grace,
    and each browser reconnects (``retry:``) to a live process and resumes: nothing is
    announced if it is back within ``DISCONNECT_GRACE``."""
    streams = list(_open_streams)
    for es in streams:
        es.end()
    return len(streams)


def chain_shutdown_signals() -> None:
    """Makes SIGTERM and SIGINT end this process' streams first, then do what they did (the
    server's graceful shutdown). A server's graceful shutdown waits for every response to
    finish, and a stream never does: uvicorn would wait its ``--timeout-graceful-shutdown``
    (by default, for ever). Done once, by the first stream, from the main thread (where the
    server's handlers are installed by then); a handler that is not a callable (the default,
    or ignored) is left alone."""
    global _signals_chained
    if _signals_chained or threading.current_thread() is not threading.main_thread():
        return
    _signals_chained = True
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue  # the default (the process just ends) or ignored: nothing to come first

        def handler(signum: int, frame: Any, previous: Any = previous) -> None:
            with suppress(RuntimeError):  # the loop is closed: no stream is left to end
                loop.call_soon_threadsafe(end_streams)
            previous(signum, frame)

        signal.signal(sig, handler)


def track(stream: Any) -> None:
    """Registers an open stream (anything with ``end()``; kept weakly) to be ended when the
    server is told to stop, and chains the shutdown signals (once). A stream with a ``channel``
    is remembered by it (:func:`stream_ended`)."""
    chain_shutdown_signals()
    _open_streams.add(stream)
    channel = getattr(stream, "channel", None)
    if isinstance(channel, str):
        _by_channel[channel] = stream
        weakref.finalize(stream, ended, channel)


def ended(channel: str) -> None:
    """The stream of ``channel`` ended (or its channel is known to answer no more)."""
    _ended[channel] = None
    _ended.move_to_end(channel)
    while len(_ended) > ENDED_KEPT:
        _ended.popitem(last=False)


def stream_ended(channel: str) -> bool:
    """Is ``channel`` the channel of a stream known to have ended (on this process: its session
    closed, or the stream gone; elsewhere: a call to it got no answer)? False when unknown."""
    if channel in _ended:
        return True
    stream = _by_channel.get(channel)
    session = getattr(stream, "session", None)
    return bool(getattr(session, "closed", False))
