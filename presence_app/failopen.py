"""Fail open: when Redis is away, pages are served without presence and one warning is logged.

A process-wide breaker remembers the failure for ``TOUCH_INTERVAL`` seconds. While it is open the
middleware and the template tags skip Redis entirely, so a dead Redis costs one connection
timeout per interval rather than one per request, and the log gets one line per interval.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from redis.exceptions import ConnectionError, TimeoutError

from . import conf

logger = logging.getLogger("presence_app")

#: What "Redis is away" looks like; anything else is a bug and must not be hidden.
REDIS_DOWN: tuple[type[Exception], ...] = (ConnectionError, TimeoutError)


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
            type(exc).__name__, where, conf.get("TOUCH_INTERVAL"),
        )

    def reset(self) -> None:
        self._until = 0.0


breaker = Breaker()


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    # A new Redis URL (tests, reconfiguration) deserves a fresh try.
    if setting == "PRESENCE":
        breaker.reset()
