"""Touches off the request path: the middleware hands each due user to a batch, and a
background thread writes the batch every ``HEARTBEAT_FLUSH_INTERVAL`` (at most 1 s) in one
round trip, as the coalescer does for heartbeats. A request never waits on Redis for presence;
with Redis away the batch is dropped (fail open: the next request of those users touches
again once the breaker closes).
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections
from django.http import HttpRequest

from .. import conf, presence
from ..core import tenants
from ..failopen import breaker
from ..store import UNAVAILABLE, Transition

logger = logging.getLogger("presence_app")

#: Set on a request the middleware keeps its user online by: the template tags then read the
#: request's own user as online on the page it renders, before the background write lands.
TOUCHED = "_presence_touched"


def is_activity(request: HttpRequest) -> bool:
    """Did a person do this? Navigations and form posts yes; a page's own background requests
    (fetch/XHR polling, auto-refresh) keep the user online but must not keep them from idle."""
    if request.method not in ("GET", "HEAD"):
        return True
    if request.headers.get("X-Requested-With") == "XMLHttpRequest":
        return False
    mode = request.headers.get("Sec-Fetch-Mode")
    return mode is None or mode == "navigate"


class TouchBatcher:
    """Pending touches of one process: ``{user_id: activity}`` (``(tenant, user_id)`` keys in
    a tenant), written by a daemon thread: one round trip per tenant in the batch."""

    def __init__(self) -> None:
        #: False: no thread; touches wait for :meth:`flush` (tests that count writes).
        self.background = True
        self.pending: dict[str | tuple[str, str], bool] = {}
        self._lock = threading.Lock()
        # Held while a batch is written: a flush waits for one the thread has taken and not yet
        # written (add() never takes it: a request does not wait on Redis).
        self._writing = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, user_id: str, activity: bool, tenant: str | None = None) -> None:
        """Queues a touch (an activity wins over a background request in the same batch)."""
        key = user_id if tenant is None else (tenant, user_id)
        with self._lock:
            self.pending[key] = self.pending.get(key, False) or activity
            if self.background and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(
                    target=self._run, name="presence-touches", daemon=True
                )
                self._thread.start()

    def flush(self) -> list[Transition]:
        """Writes the pending touches now (tests, shutdown); returns the transitions made.
        Every touch queued before the call is written when it returns, also those of a batch
        the background thread was writing meanwhile."""
        with self._writing:
            return self._write()

    def _write(self) -> list[Transition]:
        with self._lock:
            batch, self.pending = self.pending, {}
        if not batch or breaker.is_open:
            return []
        by_tenant: dict[str | None, list[tuple[str, bool]]] = {}
        for key, activity in batch.items():
            tenant, uid = key if isinstance(key, tuple) else (None, key)
            by_tenant.setdefault(tenant, []).append((uid, activity))
        try:
            out: list[Transition] = []
            for tenant, pairs in by_tenant.items():
                with tenants.activate(tenant):
                    out += presence.touch_many(pairs)
            return out
        except UNAVAILABLE as exc:
            breaker.trip(exc, "PresenceMiddleware")
            return []
        finally:
            close_old_connections()  # signal receivers (LastSeen) may have used the database

    def _run(self) -> None:
        # Ends once the batch is switched to explicit flushes (tests): the next add() with
        # background on starts a thread again.
        while True:
            time.sleep(min(float(conf.get("HEARTBEAT_FLUSH_INTERVAL")), 1.0))
            if not self.background:
                return
            try:
                self.flush()
            except Exception:  # a bug must not end the thread: touches would stop for good
                logger.exception("presence: writing a batch of touches failed")


batcher = TouchBatcher()
