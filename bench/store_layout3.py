"""14. Store layout 3, the store's default (``Store(client, config, layout=3)``:
docs/store-layout-3.md), through its public ``Store`` methods, side by side with raw Redis
on the same 1,000,000-user data set in the same run:

- memory: ``used_memory`` growth for N users connected through ``Store.connect`` (one
  WebSocket each, 12-character conn ids, no room, no status), against a bare sorted set of the
  same ids; for N/10 HTTP-only users (``Store.touch_many``, the middleware's path), the same;
  and what a status (message, emoji, device) adds to a user;
- ``heartbeat_many`` in batches of 1,000 against one raw ``ZADD`` of the same batch into a bare
  sorted set of the same ids (alternating rounds, a clock that renews each user every 30 s);
- ``get_many(200)``, each presence's state, emoji and message read (a dot's fields: the
  derivation included), against a raw ``ZMSCORE`` of the same ids (alternating blocks); the
  same through the front door (``presence.get_many`` of 200 user objects, ``STORE_LAYOUT = 3``),
  and with ``activity=True`` (the reads that show a last activity: a registry field a user more);
  100 connected users and 100 never seen; and 200 users with a status message, emoji and device
  against 200 plain ones, through the front door (the target) and through the store; and the
  layout's floors, side by side in the same run: lua3/get_many.lua's call alone (the reply as
  hiredis parses it, nothing derived), and that call with 200 presences made from it with no
  logic at all (a plain user's three fields; a status user's record decoded and split, and its
  six): the least a derivation of this layout's reply into presences pays;
- ``sweep()`` of 10,000 users of a killed process (another ``Store``, connected 200 s before,
  its lease run out) among N, every ``offline`` checked, against ``ZRANGEBYSCORE`` +
  ``ZREMRANGEBYSCORE`` of the same members of a copy of the set (median of 7, in turn).
"""

from __future__ import annotations

import gc
import random
from itertools import repeat

from presence_app.store import Presence, Store, StoreConfig, scripts
from presence_app.store.keys import KeySpace
from presence_app.store.types import SEP

from .common import Check, Context, Row, benchmark, latencies, median, rates, timed
from .dataset import T0, conn_ids, settle, used_memory

PREFIX = "b3"
BARE = "bench:raw:l3"
RAW_SWEEP = "bench:raw:l3sweep"


@benchmark("layout3", "14. store layout 3 (the default) through Store, vs raw Redis")
def run(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    client = ctx.redis.client()
    config = StoreConfig(prefix=PREFIX, registry_buckets=max(1, n // 64))
    store = Store(client, config, layout=3)
    uids = [str(i) for i in range(1, n + 1)]
    cids = conn_ids(n, seed=1)
    tag = store.keys.tag(0)
    ctx.log(f"connecting {n:,} users through Store(layout=3).connect, 1,000 per round trip")
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
            metric=f"bytes per plain online user, {n:,} users (Store(layout=3).connect)",
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
            checks=[Check(">= 0.5x raw", o / w, ">=", 0.5)],
            details={"ours": r["ours"], "raw": r["raw"]},
        )
    )

    # get_many(200), a dot's fields read, against raw ZMSCORE; 200 users with a status
    rng = random.Random(2)
    custom = rng.sample(uids, 64 * 200)
    chosen = set(custom)
    plain = [u for u in uids if u not in chosen]
    sets = [rng.sample(plain, 200) for _ in range(64)]
    status_sets = [custom[i * 200 : (i + 1) * 200] for i in range(64)]
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
    it = dict.fromkeys(
        (
            "ours",
            "status",
            "raw",
            "public",
            "public_status",
            "public_activity",
            "mixed",
            "script",
            "script_status",
            "floor",
            "floor_status",
        ),
        0,
    )
    # the front door on this store: presence.get_many of 200 user objects, a dot's fields read
    from .store_reads import front_door

    presence = front_door(ctx.redis.url, PREFIX)
    from django.contrib.auth.models import User
    from django.test import override_settings

    layout3 = override_settings(
        PRESENCE={
            "REDIS_URL": ctx.redis.url,
            "KEY_PREFIX": PREFIX,
            "STORE_LAYOUT": 3,
            "REGISTRY_BUCKETS": config.registry_buckets,
        }
    )
    layout3.enable()
    user_sets = [[User(pk=int(uid), username=f"user{uid}") for uid in ids] for ids in sets]
    status_users = [
        [User(pk=int(uid), username=f"user{uid}") for uid in ids] for ids in status_sets
    ]
    # 100 connected users and 100 never seen: the script reads the others' indexes too
    mixed_sets = [ids[:100] + [f"x{i}-{j}" for j in range(100)] for i, ids in enumerate(sets)]

    def read(found: dict) -> None:
        for p in found.values():
            p.state, p.emoji, p.message  # noqa: B018

    def ours() -> None:
        i = it["ours"] = (it["ours"] + 1) % len(sets)
        read(store.get_many(sets[i], now=now))

    def status() -> None:
        i = it["status"] = (it["status"] + 1) % len(status_sets)
        read(store.get_many(status_sets[i], now=now))

    def raw() -> None:
        i = it["raw"] = (it["raw"] + 1) % len(sets)
        client.zmscore(KeySpace.seen(tag), sets[i])

    def public() -> None:
        i = it["public"] = (it["public"] + 1) % len(user_sets)
        read(presence.get_many(user_sets[i], now=now))

    def public_status() -> None:
        i = it["public_status"] = (it["public_status"] + 1) % len(status_users)
        read(presence.get_many(status_users[i], now=now))

    def public_activity() -> None:  # the dashboard's, the API's and the snapshots' read
        i = it["public_activity"] = (it["public_activity"] + 1) % len(user_sets)
        read(presence.get_many(user_sets[i], now=now, activity=True))

    def mixed() -> None:
        i = it["mixed"] = (it["mixed"] + 1) % len(mixed_sets)
        read(store.get_many(mixed_sets[i], now=now))

    # The floors: the script's call as the store sends it (its arguments made beforehand), and
    # presences made from its reply with no logic (no liveness, no grace, no invisible).
    store.get_many(sets[0], now=now)  # the script loaded
    sha = scripts.load()["3/get_many"].sha

    def evalsha_args(ids: list[str]) -> tuple:
        call = store.plans.get_many(ids, None, False, now).calls[0]
        return (sha, len(call.keys), *call.keys, *call.args)

    script_args = {
        "plain": [evalsha_args(ids) for ids in sets],
        "status": [evalsha_args(ids) for ids in status_sets],
    }
    new = object.__new__

    def script() -> None:
        i = it["script"] = (it["script"] + 1) % len(sets)
        client.evalsha(*script_args["plain"][i])

    def script_status() -> None:
        i = it["script_status"] = (it["script_status"] + 1) % len(status_sets)
        client.evalsha(*script_args["status"][i])

    def floor() -> None:
        i = it["floor"] = (it["floor"] + 1) % len(sets)
        client.evalsha(*script_args["plain"][i])
        out = {}
        for uid in sets[i]:
            out[uid] = p = new(Presence)
            d = p.__dict__
            d["user_id"], d["state"], d["last_seen"] = uid, "online", now
        read(out)

    def floor_status() -> None:
        i = it["floor_status"] = (it["floor_status"] + 1) % len(status_sets)
        records = client.evalsha(*script_args["status"][i])[2]  # every one has one
        out = {}
        for uid, raw in zip(status_sets[i], records, strict=True):
            _, _, _, _, msg, emo, dev, _, _, _, _, _ = raw.decode().split(SEP, 11)
            out[uid] = p = new(Presence)
            d = p.__dict__
            d["user_id"], d["state"], d["last_seen"] = uid, "online", now
            d["message"], d["emoji"], d["device"] = msg, emo, dev
        read(out)

    if not all(p.state == "online" for p in store.get_many(sets[0], now=now).values()):
        raise RuntimeError("the population is not online")
    if not all(p.message for p in store.get_many(status_sets[0], now=now).values()):
        raise RuntimeError("the status users have no status")
    try:
        for users, ids in ((user_sets[0], sets[0]), (status_users[0], status_sets[0])):
            if presence.get_many(users, now=now) != store.get_many(ids, now=now):
                raise RuntimeError("the front door does not read what the store does")
        fns = {
            "ours": ours,
            "status": status,
            "raw": raw,
            "public": public,
            "public_status": public_status,
            "public_activity": public_activity,
            "mixed": mixed,
            "script": script,
            "script_status": script_status,
            "floor": floor,
            "floor_status": floor_status,
        }
        lat = latencies(fns, ctx.size(10_000, 1000))
    finally:
        layout3.disable()  # the benchmarks after this one see the settings they had
    w = lat["raw"]

    def read_row(name: str, metric: str, target: bool = True) -> Row:
        """A read's p99 against the raw ZMSCORE's, in the same run."""
        r = lat[name]
        return Row(
            bench="14 layout3",
            metric=metric,
            ours=r["p99_ms"],
            unit="ms",
            baseline=w["p99_ms"],
            baseline_label="ZMSCORE",
            checks=[Check("<= 2x raw", r["p99_ms"] / w["p99_ms"], "<=", 2.0)] if target else [],
            details={"ours": r, "raw": w, "ratio_p50": r["p50_ms"] / w["p50_ms"]},
        )

    def status_row(name: str, plain: str, metric: str, target: bool = True) -> Row:
        """200 users with a status against 200 plain ones, p50, read the same way."""
        r, o = lat[name], lat[plain]
        return Row(
            bench="14 layout3",
            metric=metric,
            ours=r["p50_ms"],
            unit="ms",
            baseline=o["p50_ms"],
            baseline_label="200 plain users",
            checks=[Check("<= 1.2x plain", r["p50_ms"] / o["p50_ms"], "<=", 1.2)] if target else [],
            details={"ours": r, "plain": o, "ratio": r["p50_ms"] / o["p50_ms"]},
        )

    def status_extra_row() -> Row:
        """What a status adds to 200 users through the front door (status p50 - plain p50),
        against what it adds at least: the floors' difference (the records read, decoded and
        split, three fields more, with no logic). 1.2x plain leaves it 0.2x the plain read."""
        extra = lat["public_status"]["p50_ms"] - lat["public"]["p50_ms"]
        least = lat["floor_status"]["p50_ms"] - lat["floor"]["p50_ms"]
        return Row(
            bench="14 layout3",
            metric="what a status adds to 200 users through the front door, p50, against what "
            "it adds at least (the floors' difference)",
            ours=extra,
            unit="ms",
            baseline=least,
            baseline_label="the floors' difference",
            checks=[],
            details={
                "budget_ms": 0.2 * lat["public"]["p50_ms"],
                "plain_ms": lat["public"]["p50_ms"],
            },
        )

    rows += [
        read_row("ours", f"get_many(200) p99, a dot's fields read, {n:,} users"),
        read_row(
            "public",
            f"presence.get_many(200 user objects) p99, a dot's fields read, {n:,} users",
        ),
        read_row(
            "public_activity",
            "presence.get_many(200 user objects, activity=True) p99 (the dashboard's, the API's)",
            target=False,
        ),
        read_row(
            "mixed",
            "get_many(200) p99, 100 connected and 100 never seen (read further)",
            target=False,
        ),
        status_row(
            "public_status",
            "public",
            "presence.get_many(200 user objects) p50, every user with a status message, emoji "
            "and device",
        ),
        status_row(
            "status",
            "ours",
            "get_many(200) p50 (the store's part), every user with a status message, emoji and "
            "device",
            target=False,
        ),
        read_row(
            "script",
            "the layout's floor: lua3/get_many.lua's call alone for 200 plain users, p99 (its "
            "reply as hiredis parses it, nothing derived)",
            target=False,
        ),
        read_row(
            "floor",
            "the layout's floor: that call and 200 presences made from it with no logic, p99",
            target=False,
        ),
        status_row(
            "script_status",
            "script",
            "the layout's floor for status users: the script's call alone, p50, against plain "
            "users'",
            target=False,
        ),
        status_row(
            "floor_status",
            "floor",
            "the layout's floor for status users: the call and presences made with no logic "
            "(each record decoded and split), p50, against plain users'",
            target=False,
        ),
        status_extra_row(),
    ]
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
    killed = Store(client, config, layout=3)  # another process
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
    # HTTP-only users (the middleware's touch, no socket), against a bare sorted set of them
    web = [f"w{i}" for i in range(n // 10)]
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
            baseline_label="bare ZSET",
            checks=[Check("<= 1.5x bare", web_bytes / bare_web, "<=", 1.5)],
            details={"users": len(web), "ours_bytes": web_bytes, "bare_bytes": bare_web},
        )
    )
    store.clear()
    return rows
