"""14. The store's layout (store layout 3: docs/store-layout.md) through its public ``Store``
methods, side by side with raw Redis on the same 1,000,000-user data set in the same run (its
reads are benchmark 2's, ``bench/front_door.py``):

- memory: ``used_memory`` growth for N users connected through ``Store.connect`` (one
  WebSocket each, 12-character conn ids, no room, no status), against a bare sorted set of the
  same ids; for N/10 HTTP-only users (``Store.touch_many``, the middleware's path), the same,
  the bare set holding as many entries first as the one index holds (both grow alike);
  and what a status (message, emoji, device) adds to a user;
- ``heartbeat_many`` in batches of 1,000 against one raw ``ZADD`` of the same batch into a bare
  sorted set of the same ids (alternating rounds, a clock that renews each user every 30 s);
- ``sweep()`` of 10,000 users of a killed process (another ``Store``, connected 200 s before,
  its lease run out) among N, every ``offline`` checked, against ``ZRANGEBYSCORE`` +
  ``ZREMRANGEBYSCORE`` of the same members of a copy of the set (median of 7, in turn);
- records first's renewals (for information): Redis' own time a holder of the sweep renewing
  the copies of 12,800 connected status users' scores in their records, against the heartbeat's
  a user (``copy_renewal``).
"""

from __future__ import annotations

import gc
import random
from itertools import repeat

from presence_app.store import Store, StoreConfig
from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark, median, rates, timed
from .dataset import T0, conn_ids, settle, used_memory

PREFIX = "b3"
BARE = "bench:raw:l3"
RAW_SWEEP = "bench:raw:l3sweep"


@benchmark("layout3", "14. the store's memory, heartbeats and sweep through Store, vs raw Redis")
def run(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    client = ctx.redis.client()
    config = StoreConfig(prefix=PREFIX, registry_buckets=max(1, n // 64))
    store = Store(client, config)
    uids = [str(i) for i in range(1, n + 1)]
    cids = conn_ids(n, seed=1)
    tag = store.keys.tag(0)
    ctx.log(f"connecting {n:,} users through Store.connect, 1,000 per round trip")
    settle(client)
    before = used_memory(client)
    plans = store.planned
    for i in range(0, n, 1000):
        store.gather(*(plans.connect(cids[j], uids[j], now=T0) for j in range(i, min(i + 1000, n))))
    settle(client)
    ours_bytes = used_memory(client) - before
    before = used_memory(client)
    for i in range(0, n, 10_000):
        client.zadd(BARE, dict(zip(uids[i : i + 10_000], repeat(T0))))
    bare_bytes = used_memory(client) - before
    rows = [
        Row(
            bench="14 layout3",
            metric=f"bytes per plain online user, {n:,} users (Store.connect)",
            ours=ours_bytes / n,
            unit="B",
            baseline=bare_bytes / n,
            baseline_label="bare ZSET",
            checks=[Check("<= 2x bare", ours_bytes / bare_bytes, "<=", 2.0)],
            details={"population": n, "ours_bytes": ours_bytes, "bare_bytes": bare_bytes},
        )
    ]

    # heartbeat_many, batches of 1,000, against raw ZADD of the same batch
    clock, at = [T0 + 1], {"ours": 0, "raw": 0}
    pairs = list(zip(cids, uids, strict=True))

    def batch(side: str) -> int:
        i = at[side] = (at[side] + 1000) % n
        if side == "ours":  # every user renewed once per 30 s of the clock (the raw side's
            clock[0] += 0.03  # batches must not age them: the reads and the sweep need them fresh)
        return i

    def heartbeat() -> int:
        i = batch("ours")
        missing = store.heartbeat_many(pairs[i : i + 1000], now=clock[0])
        if missing:
            raise RuntimeError(f"{len(missing)} heartbeats found no user")
        return 1000

    def raw_zadd() -> int:
        i, now = batch("raw"), repr(clock[0])
        client.execute_command("ZADD", BARE, *[x for u in uids[i : i + 1000] for x in (now, u)])
        return 1000

    r = rates({"ours": heartbeat, "raw": raw_zadd}, rounds=ctx.size(7, 3), seconds=1.5)
    o, w = r["ours"]["median"], r["raw"]["median"]
    rows.append(
        Row(
            bench="14 layout3",
            metric="heartbeat_many, batch 1,000",
            ours=o,
            unit="/s",
            baseline=w,
            baseline_label="ZADD",
            checks=[
                Check(">= 0.5x raw", o / w, ">=", 0.5),
                Check(">= 250k hb/s", o, ">=", 250_000),
            ],
            details={"ours": r["ours"], "raw": r["raw"]},
        )
    )

    # what a status adds to a user (12,800 users drawn from the whole population)
    custom = random.Random(2).sample(uids, 64 * 200)
    now = clock[0]
    status = {"message": "In a meeting until 3 pm", "emoji": "📅", "device": "Firefox"}
    settle(client)
    before = used_memory(client)
    for i in range(0, len(custom), 500):
        store.gather(*(plans.set_status(u, **status, now=now) for u in custom[i : i + 500]))
    settle(client)
    status_bytes = (used_memory(client) - before) / len(custom)
    text_bytes = sum(len(v.encode()) for v in status.values())
    rows.append(
        Row(
            bench="14 layout3",
            metric=f"bytes a status (message, emoji and device: {text_bytes} B of text) adds to a "
            f"connected user ({len(custom):,} users: a record each)",
            ours=status_bytes,
            unit="B",
            baseline=text_bytes,
            baseline_label="the text",
            checks=[],
            details={"users": len(custom)},
        )
    )
    for i in range(0, len(custom), 500):  # plain again
        store.gather(
            *(
                plans.set_status(u, message="", emoji="", device="", now=now)
                for u in custom[i : i + 500]
            )
        )

    # sweep(): 10,000 users of a killed process among n
    expired = 10_000
    stale = [(cid, f"x{i}") for i, cid in enumerate(conn_ids(expired, seed=99))]
    killed = Store(client, config)  # another process
    sweep_at = now + 1
    ours_ms: list[float] = []
    raw_ms: list[float] = []
    gc.freeze()
    try:
        for rep in range(ctx.size(7, 3)):
            kplans = killed.planned
            for i in range(0, expired, 1000):
                killed.gather(
                    *(kplans.connect(c, u, now=sweep_at - 200) for c, u in stale[i : i + 1000])
                )
            if rep == 0:
                client.execute_command("ZUNIONSTORE", RAW_SWEEP, 1, KeySpace.seen(tag))
            seconds, transitions = timed(lambda: store.sweep(now=sweep_at))
            ours_ms.append(seconds * 1000)
            offline = {t.user_id for t in transitions if t.kind == "offline"}
            if len(offline) != expired or len(transitions) != expired:
                raise RuntimeError(f"sweep announced {len(transitions)}, expected {expired}")
            if client.zcard(KeySpace.seen(tag)) != n:
                raise RuntimeError("sweep evicted a live user")
            floor = f"({sweep_at - config.lease_ttl}"

            def raw_sweep(floor: str = floor) -> list:
                pipe = client.pipeline(transaction=True)
                pipe.zrangebyscore(RAW_SWEEP, "-inf", floor, withscores=True)
                pipe.zremrangebyscore(RAW_SWEEP, "-inf", floor)
                return pipe.execute()

            seconds, (got, removed) = timed(raw_sweep)
            if removed != expired:
                raise RuntimeError(f"raw sweep removed {removed}")
            raw_ms.append(seconds * 1000)
            client.zadd(RAW_SWEEP, dict(got))
            ctx.log(f"sweep {rep + 1}: {ours_ms[-1]:.1f} ms (raw {raw_ms[-1]:.1f} ms)")
    finally:
        gc.unfreeze()
        client.unlink(BARE, RAW_SWEEP)
    o, w = median(ours_ms), median(raw_ms)
    rows.append(
        Row(
            bench="14 layout3",
            metric=f"sweep() of {expired:,} users of a killed process among {n:,}",
            ours=o,
            unit="ms",
            baseline=w,
            baseline_label="ZRANGEBYSCORE+ZREMRANGEBYSCORE",
            checks=[
                Check("<= 4x raw", o / w, "<=", 4.0),
                Check("every transition", len(offline), ">=", expired),
            ],
            details={"ours_ms": ours_ms, "raw_ms": raw_ms},
        )
    )
    # records first: the sweep renews the copies of record holders' scores (K_COPIES) half a
    # lease after the score they copy; Redis' own time a holder renewed, against the heartbeat's
    # a user (the same users, beating every half lease), on a store of their own
    rows.append(copy_renewal(ctx, client, status))

    # HTTP-only users (the middleware's touch, no socket), against a bare sorted set of them.
    # They join `seen` (the one index), which holds the site's connected users: the bare set
    # holds as many entries first, so that both grow alike (a sorted set's hash table doubles
    # at 2^20 entries: 16 MB that 100,000 users crossing it would be charged alone).
    web = [f"w{i}" for i in range(n // 10)]
    held = client.zcard(store.keys.seen(tag))
    for i in range(0, held, 10_000):
        client.zadd(BARE, {f"held{j}": T0 for j in range(i, min(i + 10_000, held))})
    settle(client)
    before = used_memory(client)
    for i in range(0, len(web), 1000):
        store.touch_many([(u, True) for u in web[i : i + 1000]], now=sweep_at)
    settle(client)
    web_bytes = used_memory(client) - before
    before = used_memory(client)
    for i in range(0, len(web), 10_000):
        client.zadd(BARE, dict(zip(web[i : i + 10_000], repeat(T0))))
    bare_web = used_memory(client) - before
    client.unlink(BARE)
    rows.append(
        Row(
            bench="14 layout3",
            metric=f"bytes per HTTP-only user, {len(web):,} users (Store.touch_many) among {n:,}",
            ours=web_bytes / len(web),
            unit="B",
            baseline=bare_web / len(web),
            baseline_label=f"bare ZSET of {held:,} more",
            checks=[Check("<= 1.5x bare", web_bytes / bare_web, "<=", 1.5)],
            details={
                "users": len(web),
                "ours_bytes": web_bytes,
                "bare_bytes": bare_web,
                "bare_held": held,
            },
        )
    )
    store.clear()
    return rows


def _script_usec(client) -> int:
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0)


def copy_renewal(ctx: Context, client, status: dict[str, str]) -> Row:
    """Records first's cost: ``held`` connected users with a status (a record each, its copy of
    the user's score in it) beat every half lease and more (one clock for all); each round, a
    sweep renews every copy (all due), then a sweep with none due. Redis' own time
    (``INFO commandstats``) of the first less the second, a holder, against the heartbeats' a
    user."""
    held = 12_800
    config = StoreConfig(prefix=PREFIX + "c", registry_buckets=max(1, held // 64))
    store = Store(client, config)
    plans = store.planned
    users = [f"h{i}" for i in range(held)]
    pairs = list(zip(conn_ids(held, seed=7), users, strict=True))
    for i in range(0, held, 1000):
        store.gather(*(plans.connect(c, u, now=T0) for c, u in pairs[i : i + 1000]))
        store.gather(*(plans.set_status(u, **status, now=T0) for u in users[i : i + 1000]))
    copies = [KeySpace.copies(store.keys.tag(s)) for s in range(config.shards)]
    at, renew, idle, beat = T0, [], [], []
    for _ in range(ctx.size(7, 3)):
        at += config.lease_ttl / 2 + 1
        before = _script_usec(client)
        for i in range(0, held, 1000):
            if store.heartbeat_many(pairs[i : i + 1000], now=at):
                raise RuntimeError("a heartbeat found no user")
        beat.append(_script_usec(client) - before)
        if sum(client.zcount(k, "-inf", at) for k in copies) != held:
            raise RuntimeError("not every copy is due")
        before = _script_usec(client)
        store.sweep(now=at)
        renew.append(_script_usec(client) - before)
        if sum(client.zcount(k, "-inf", at) for k in copies) != 0:
            raise RuntimeError("the sweep left copies due")
        before = _script_usec(client)
        store.sweep(now=at)
        idle.append(_script_usec(client) - before)
    store.clear()
    per_holder = (median(renew) - median(idle)) / held
    per_beat = median(beat) / held
    ctx.log(f"copy renewal: {per_holder:.2f} us a holder (a heartbeat: {per_beat:.2f} us a user)")
    return Row(
        bench="14 layout3",
        metric=f"sweep() renewing the copies of {held:,} status users' scores (records first): "
        "Redis' own time a holder",
        ours=per_holder,
        unit="us",
        baseline=per_beat,
        baseline_label="heartbeat_many, a user",
        checks=[],
        details={"renew_us": renew, "idle_us": idle, "beat_us": beat, "holders": held},
    )
