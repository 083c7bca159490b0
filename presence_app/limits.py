"""Per-socket rate limits: a token bucket for frames, and throttles for writes and broadcasts."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved: bursts are fine, floods are not."""

    def __init__(self, rate: float, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else rate)
        self.clock = clock
        self.tokens = self.burst
        self.stamp = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class Throttle:
    """At most one action per ``interval`` seconds per key; keeps at most ``max_keys`` keys."""

    def __init__(self, interval: float, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = float(interval)
        self.max_keys = max_keys
        self.clock = clock
        self.last: dict[Hashable, float] = {}

    def ready(self, key: Hashable = None) -> bool:
        """True (and the clock restarts) when ``key`` may act now."""
        now = self.clock()
        last = self.last.get(key)
        if last is not None and now - last < self.interval:
            return False
        if len(self.last) >= self.max_keys:
            self.last = {k: t for k, t in self.last.items() if now - t < self.interval}
        self.last[key] = now
        return True

    def forget(self, key: Hashable = None) -> None:
        self.last.pop(key, None)
