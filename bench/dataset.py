"""Populations of connected users, built fast and exactly as the store's own scripts build them.

Connecting a million users through ``Store.connect`` one call at a time would take minutes. The
fill sends the store's real ``connect.lua`` body (with the real ``lib.lua`` prelude), wrapped in a
loop over a batch of (user, connection) pairs: one EVALSHA per thousand users, the very code a
connect runs, so the keys, fields, scores and expiries are the ones the store writes (checked
after the fill against a user connected through the public ``Store.connect``).

Every figure is then measured through the public Store API, not through this helper.
"""

from __future__ import annotations

import base64
import random
import time
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import redis

from presence_app.store import Store, StoreConfig
from presence_app.store.keys import KeySpace

from .common import Context

#: The clock of every benchmark (unix seconds, 2026-11-18): the store takes ``now`` on each call.
T0 = 1_795_000_000.0
CHUNK = 1000  # users per bulk call


def lua_source(name: str) -> str:
    return resources.files("presence_app.store").joinpath("lua", f"{name}.lua").read_text()


@cache
def bulk_connect_source() -> str:
    """lib.lua + connect.lua's body as a function, called once per (user, conn) pair."""
    body = lua_source("connect")
    return "\n".join(
        [
            lua_source("lib"),
            "local function connect_one(ARGV)",
            body,
            "end",
            "local HEAD = {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]}",
            "local n = 0",
            "for i = A, #ARGV, 2 do",
            "  OUT = {}",
            "  connect_one({HEAD[1], HEAD[2], HEAD[3], HEAD[4], HEAD[5], HEAD[6], HEAD[7],"
            " ARGV[i], ARGV[i + 1], ''})",
            "  n = n + 1",
            "end",
            "return n",
        ]
    )


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
    """``n`` users ``first..first+n-1`` with one connection each, connected at ``t0``."""

    store: Store
    client: redis.Redis
    n: int
    uids: list[str]
    cids: list[str]
    t0: float
    fill_seconds: float = 0.0
    memory_before: int = 0
    memory_after: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """(conn_id, user_id) pairs, as the coalescer hands them to heartbeat_many."""
        return list(zip(self.cids, self.uids, strict=True))

    def lease_members(self) -> list[str]:
        return [f"{u}|{c}" for u, c in zip(self.uids, self.cids, strict=True)]


def bulk_connect(
    store: Store, pairs: list[tuple[str, str]], now: float, pipeline_depth: int = 8
) -> int:
    """Connects (conn_id, user_id) pairs with the real connect.lua, CHUNK users per call."""
    client = store.client
    source = bulk_connect_source()
    sha = client.script_load(source)
    head = store.plans.call("connect", store.keys.tag(0), now).args[:7]
    if store.keys.shards != 1:
        raise ValueError("the bulk fill builds single-shard stores (the default SHARDS = 1)")
    done = 0
    pipe = client.pipeline(transaction=False)
    queued = 0
    for i in range(0, len(pairs), CHUNK):
        args: list[str] = []
        for cid, uid in pairs[i : i + CHUNK]:
            args.append(uid)
            args.append(cid)
        call = store.plans.call("connect", store.keys.tag(0), now)
        pipe.evalsha(sha, len(call.keys), *call.keys, *head, *args)
        queued += 1
        if queued >= pipeline_depth:
            done += sum(pipe.execute())
            queued = 0
    if queued:
        done += sum(pipe.execute())
    return done


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
    """The shared population of ``n`` users under ``prefix`` (built once per run)."""
    key = f"population:{prefix}:{n}"
    if key in ctx.cache:
        return ctx.cache[key]
    client = ctx.redis.client()
    store = Store(client, StoreConfig(prefix=prefix), layout=2)
    uids = [str(i) for i in range(1, n + 1)]
    cids = conn_ids(n, seed)
    ctx.log(f"filling {n:,} users under {prefix!r} (real connect.lua, {CHUNK} per call)")
    settle(client)
    before = used_memory(client)
    t = time.perf_counter()
    done = bulk_connect(store, list(zip(cids, uids, strict=True)), T0)
    seconds = time.perf_counter() - t
    after = used_memory(client)
    if done != n:
        raise RuntimeError(f"bulk connect made {done} of {n} connections")
    pop = Population(store, client, n, uids, cids, T0, seconds, before, after)
    check_fidelity(pop)
    ctx.log(f"filled {n:,} users in {seconds:.1f}s ({n / seconds:,.0f}/s)")
    ctx.cache[key] = pop
    return pop


def population3(ctx: Context, n: int, prefix: str, seed: int = 1) -> Population:
    """The same on store layout 3, the default: filled through ``Store.connect`` itself (1,000
    per round trip), so there is no fidelity to check (built once per run)."""
    key = f"population3:{prefix}:{n}"
    if key in ctx.cache:
        return ctx.cache[key]
    client = ctx.redis.client()
    store = Store(client, StoreConfig(prefix=prefix, registry_buckets=max(1, n // 64)), layout=3)
    uids = [str(i) for i in range(1, n + 1)]
    cids = conn_ids(n, seed)
    ctx.log(f"connecting {n:,} users under {prefix!r} through Store(layout=3).connect")
    t = time.perf_counter()
    plans = store.planned
    for i in range(0, n, CHUNK):
        store.gather(
            *(plans.connect(cids[j], uids[j], now=T0) for j in range(i, min(i + CHUNK, n)))
        )
    pop = Population(store, client, n, uids, cids, T0, time.perf_counter() - t)
    ctx.cache[key] = pop
    return pop


def check_fidelity(pop: Population) -> None:
    """The fill wrote what Store.connect writes: compare user 1 with a control user connected
    through the public API at the same clock (then remove the control user again)."""
    store, client = pop.store, pop.client
    tag = store.keys.tag(0)
    control_uid, control_cid = "control-user", "controlconn1"
    store.connect(control_cid, control_uid, now=pop.t0)
    try:
        uid, cid = pop.uids[0], pop.cids[0]

        def shape(u: str, c: str) -> dict[str, Any]:
            record = client.get(KeySpace.user(tag, u))
            return {
                "record": record.decode().replace(c, "<c>") if record else None,
                "ttl": client.ttl(KeySpace.user(tag, u)) > 0,
                "lease": client.zscore(KeySpace.leases(tag), f"{u}|{c}"),
                "seen": client.zscore(KeySpace.seen(tag), u),
                "until": client.zscore(KeySpace.until(tag), u),
                "active": client.zscore(KeySpace.active(tag), u),
            }

        got, want = shape(uid, cid), shape(control_uid, control_cid)
        if got != want:
            raise RuntimeError(f"the bulk fill differs from Store.connect: {got} != {want}")
    finally:
        client.delete(KeySpace.user(tag, control_uid))
        client.zrem(KeySpace.leases(tag), f"{control_uid}|{control_cid}")
        for index in (KeySpace.seen(tag), KeySpace.until(tag), KeySpace.active(tag)):
            client.zrem(index, control_uid)
