"""Rate limits: token buckets (one, and one per key) and the one throttle for writes, broadcasts
and logs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved: bursts are fine, floods are not."""

    def __init__(
        self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
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
    """At most one action per ``interval`` seconds per key; thread-safe, and bounded.

    Keys are kept in the order they acted, which (one interval for all) is the order they expire
    in: expired ones are dropped from the front, and past ``max_keys`` the oldest are forgotten
    early (costing one extra action each). The one throttle of the app: per socket (typing,
    activity), per process (the middleware's users) and for log lines.
    """

    def __init__(
        self, interval: float, max_keys: int = 1024, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = float(interval)
        self.max_keys = max_keys
        self.clock = clock
        self._due: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def ready(self, key: Hashable = None) -> bool:
        """True (and the key's interval starts again) when ``key`` may act now."""
        now = self.clock()
        with self._lock:
            due = self._due.get(key)
            if due is not None and due > now:
                return False
            self._due.pop(key, None)
            self._due[key] = now + self.interval
            while self._due:
                first = next(iter(self._due))
                if len(self._due) <= self.max_keys and self._due[first] > now:
                    break
                del self._due[first]
            return True

    def forget(self, key: Hashable = None) -> None:
        with self._lock:
            self._due.pop(key, None)

    def __len__(self) -> int:
        return len(self._due)


#: Clients remembered per table (users, IPs): a bounded memory whatever the traffic.
MAX_KEYS = 10_000


class KeyedBuckets:
    """A token bucket per key (a user, an IP): ``rate`` a second, bursts of ``burst``; at most
    MAX_KEYS keys remembered (full buckets, else the oldest tenth, are forgotten first)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.state: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, stamp)

    def take(self, key: Hashable, rate: float, burst: float) -> float:
        """Takes a token for ``key``: 0 when it had one, else the seconds until it will."""
        now = self.clock()
        tokens, stamp = self.state.get(key, (burst, now))
        tokens = min(burst, tokens + (now - stamp) * rate)
        if tokens < 1:
            self.state[key] = (tokens, now)
            return (1 - tokens) / rate
        if key not in self.state and len(self.state) >= MAX_KEYS:
            self._prune(now, rate, burst)
        self.state[key] = (tokens - 1, now)
        return 0.0

    def _prune(self, now: float, rate: float, burst: float) -> None:
        full = [k for k, (t, s) in self.state.items() if t + (now - s) * rate >= burst]
        for key in full or list(self.state)[: MAX_KEYS // 10]:  # else the oldest tenth
            del self.state[key]

    def clear(self) -> None:
        self.state.clear()
