"""Populations of users, written through the store that ships (``Store(client, config)``).

Every user is written by the store's own public calls (``connect``, ``touch_many``,
``set_status``), many to a round trip (``Store.gather``), so the keys are exactly those the
store writes; every figure is then measured through the public ``Store`` and front-door calls.
"""

from __future__ import annotations

import base64
import random
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from presence_app.store import Store, StoreConfig

from .common import Context

#: The clock of every benchmark (unix seconds, 2026-11-18): the store takes ``now`` on each call.
T0 = 1_795_000_000.0
CHUNK = 1000  # users per round trip


def conn_ids(n: int, seed: int) -> list[str]:
    """``n`` distinct 12-character connection ids like the consumer's token_urlsafe(9)."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        raw = base64.urlsafe_b64encode(rng.randbytes(9 * (n - len(out)))).decode()
        for i in range(0, len(raw), 12):
            cid = raw[i : i + 12]
            if len(cid) == 12 and cid not in seen:
                seen.add(cid)
                out.append(cid)
    return out


@dataclass
class Population:
    """``n`` users ``1..n`` with one connection each, connected at ``t0``."""

    store: Store
    client: redis.Redis
    n: int
    uids: list[str]
    cids: list[str]
    t0: float
    fill_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """(conn_id, user_id) pairs, as the coalescer hands them to heartbeat_many."""
        return list(zip(self.cids, self.uids, strict=True))


def connect_all(store: Store, pairs: list[tuple[str, str]], now: float) -> None:
    """Connects (conn_id, user_id) pairs through ``Store.connect``, CHUNK to a round trip."""
    plans = store.planned
    for i in range(0, len(pairs), CHUNK):
        store.gather(*(plans.connect(cid, uid, now=now) for cid, uid in pairs[i : i + CHUNK]))


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def settle(client: redis.Redis, timeout: float = 60) -> None:
    """Waits until Redis has freed what was UNLINKed (a background free would lower used_memory
    in the middle of a memory measurement)."""
    deadline = time.monotonic() + timeout
    while (
        int(client.info("memory").get("lazyfree_pending_objects", 0))
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)


def population(ctx: Context, n: int, prefix: str, seed: int = 1) -> Population:
    """``n`` users connected through ``Store.connect`` under ``prefix`` (built once per run)."""
    key = f"population:{prefix}:{n}"
    if key in ctx.cache:
        return ctx.cache[key]
    client = ctx.redis.client()
    store = Store(client, StoreConfig(prefix=prefix, registry_buckets=max(1, n // 64)))
    uids = [str(i) for i in range(1, n + 1)]
    cids = conn_ids(n, seed)
    ctx.log(f"connecting {n:,} users under {prefix!r} through Store.connect")
    t = time.perf_counter()
    connect_all(store, list(zip(cids, uids, strict=True)), T0)
    pop = Population(store, client, n, uids, cids, T0, time.perf_counter() - t)
    ctx.cache[key] = pop
    return pop
