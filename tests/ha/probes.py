"""What the high-availability tests watch while they break Redis: HTTP answers, observers'
events, lease renewals and Redis' own command counters."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from presence_app.store import Store
from tests.servers import AsgiServer, User

PAGES = ("/", "/rooms/lobby/")
API = ("/presence/api/online/",)


class HttpProbe:
    """Requests pages and the JSON API in a thread, as browsers would, until ``stop()``:
    ``statuses[path]`` counts the answers (0: no answer within the timeout)."""

    def __init__(
        self,
        server: AsgiServer,
        user: User,
        paths: tuple[str, ...] = PAGES + API,
        every: float = 0.1,
    ) -> None:
        self.server, self.user, self.paths, self.every = server, user, paths, every
        self.statuses: dict[str, Counter[int]] = {p: Counter() for p in paths}
        self.slowest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in self.paths:
                start = time.monotonic()
                try:
                    status, _ = self.server.get(path, self.user, timeout=15)
                except OSError:
                    status = 0
                self.slowest = max(self.slowest, time.monotonic() - start)
                self.statuses[path][status] += 1
            self._stop.wait(self.every)

    def __enter__(self) -> HttpProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def answers(self, paths: tuple[str, ...]) -> Counter[int]:
        out: Counter[int] = Counter()
        for path in paths:
            out.update(self.statuses[path])
        return out


def lease_expiries(store: Store) -> dict[str, float]:
    """Each user's latest lease expiry (Redis clock), read through the store's own key names:
    a user's last heartbeat (``seen``, or ``hidden`` for an invisible user) plus LEASE_TTL
    (their process's lease is its own)."""
    out: dict[str, float] = {}
    for tag in store.keys.all_tags():
        for key in (store.keys.seen(tag), store.keys.hidden(tag)):
            for member, score in store.client.zrange(key, 0, -1, withscores=True):
                user = member.decode() if isinstance(member, bytes) else member
                out[user] = max(out.get(user, 0.0), score + store.config.lease_ttl)
    return out


class EventLog:
    """Notes, per observer client, every leave and offline it is sent about ``users``."""

    def __init__(self, observers: list[Any], users: set[str]) -> None:
        self.flickers: list[dict[str, Any]] = []
        for observer in observers:
            observer.drain()
            observer.listeners.append(self._note)
        self.users = users

    def _note(self, frame: dict[str, Any]) -> None:
        if frame.get("user") not in self.users:
            return
        if frame["type"] == "presence.leave" or (
            frame["type"] == "presence.update" and frame.get("state") == "offline"
        ):
            self.flickers.append(frame)


class CommandRate:
    """Redis commands a second (INFO stats' total_commands_processed), sampled in a thread."""

    def __init__(self, client: Any, every: float = 0.5) -> None:
        self.client, self.every = client, every
        self.rates: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def by_command(self) -> dict[str, int]:
        """calls per command (INFO commandstats), for the difference of two readings."""
        return {
            k.removeprefix("cmdstat_"): int(v["calls"])
            for k, v in self.client.info("commandstats").items()
        }

    def _total(self) -> int:
        return int(self.client.info("stats")["total_commands_processed"])

    def _run(self) -> None:
        last, stamp = self._total(), time.monotonic()
        while not self._stop.wait(self.every):
            total, now = self._total(), time.monotonic()
            self.rates.append((total - last) / (now - stamp))
            last, stamp = total, now

    @property
    def peak(self) -> float:
        return max(self.rates, default=0.0)

    def __enter__(self) -> CommandRate:
        self.first = self.by_command()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        last = self.by_command()
        self.calls = {
            k: n - self.first.get(k, 0) for k, n in last.items() if n - self.first.get(k, 0)
        }
