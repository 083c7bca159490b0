"""Fail open: when Redis is away, pages are served without presence and one warning is logged.

A process-wide breaker remembers the failure for ``TOUCH_INTERVAL`` seconds. While it is open the
middleware and the template tags skip Redis entirely, so a dead Redis costs one connection
timeout per interval rather than one per request, and the log gets one line per interval.
What counts as "Redis is away" is the store's :data:`presence_app.store.UNAVAILABLE`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from . import conf
from .core.limits import Throttle
from .store import UNAVAILABLE

logger = logging.getLogger("presence_app")


class Breaker:
    """Open for ``TOUCH_INTERVAL`` seconds after a failure; thread-safe."""

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return time.monotonic() < self._until

    def trip(self, exc: Exception, where: str) -> None:
        """Records a failure; the first one of each interval is logged."""
        now = time.monotonic()
        with self._lock:
            if now < self._until:
                return
            self._until = now + float(conf.get("TOUCH_INTERVAL"))
        logger.warning(
            "Redis for presence is unreachable (%s in %s): serving without presence for %ss.",
            type(exc).__name__,
            where,
            conf.get("TOUCH_INTERVAL"),
        )

    def reset(self) -> None:
        self._until = 0.0


breaker = Breaker()
_log_outage = Throttle(10.0)


def log_outage(exc: BaseException, what: str = "") -> None:
    """The one outage log: one warning per 10 s, process-wide, for Redis or the channel layer
    being away, from code that carries on without them (a connection's calls, the channel
    layer's group calls, the batches and the sweep, which retry). ``what`` names what waits."""
    if _log_outage.ready():
        waiting = f" ({what}: retried)" if what else ""
        logger.warning("presence: Redis or the channel layer is unavailable%s: %r", waiting, exc)


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    # A new Redis URL (tests, reconfiguration) deserves a fresh try.
    if setting == "PRESENCE":
        breaker.reset()


class ChannelLayerOutageFilter(logging.Filter):
    """A logging filter for channels-redis' loggers: while Redis is away its pub/sub layer logs
    a traceback every second (its receive loop retries) and one for every socket that closes
    meanwhile. This keeps the first of them, as one line, per ``interval`` seconds, and passes
    every other record untouched::

        LOGGING = {..., "filters": {"redis_outage": {
                            "()": "presence_app.failopen.ChannelLayerOutageFilter"}},
                   "loggers": {"channels_redis.pubsub": {"filters": ["redis_outage"]}}}
    """

    def __init__(self, interval: float = 10.0) -> None:
        super().__init__()
        self.interval = float(interval)
        self._next = 0.0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, UNAVAILABLE):
            return True
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self.interval
        record.msg = "%s (%s: %s); the same is silenced for %ss"
        record.args = (record.getMessage(), type(exc).__name__, exc, self.interval)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
