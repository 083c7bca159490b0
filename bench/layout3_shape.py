"""The shape of store layout 3 as designed in docs/store-layout-3.md (not built yet), against the
raw baselines of ``python -m bench``, side by side on one Redis.

``python -m bench.layout3_shape [N]`` (default 1,000,000 users). The keys are the design's, as
its scripts would write them:

- ``seen``: one sorted set per shard, every connected visible user by their last sign of life;
- ``c:<b>``: the connection registry, hashes of ~64 users each (Redis keeps them as listpacks),
  bucket ``b`` by a hash of the user id that Python and Lua compute alike (``bucket``): a plain
  user's one connection as ``process \\x1f conn \\x1f last activity``;
- ``procs``: the processes' leases (100 processes here); a heartbeat batch renews its own;
- ``web``: users seen by HTTP only, by their last request (their one entry);
- ``u:<user>``: a record, only for a user who differs from the default (a status, idle, rooms,
  several connections);
- ``last``: offline users by their last seen (the sweep's one write per batch).

No activity index, no per-connection lease. N plain online users (one WebSocket on one of 100
processes, no room, no status) are written user by user, registry and listing interleaved, as a
store would write them. Then, side by side with the raw command each target names:

- memory per plain online user, per HTTP-only user and for a 40-character status, against a
  bare sorted set of the same ids and the message;
- a heartbeat batch of 1,000 (the process's lease, then one ``ZADD XX GT CH`` of its users)
  against a raw ``ZADD`` of the same batch, in alternating rounds;
- ``get_many(200)``: the design's read (one script: ``ZMSCORE`` of ``seen``, ``MGET`` of the
  records, which plain users do not have), with and without the registry's last activity
  (an ``HGET`` a user), each with a derivation into real ``Presence`` objects (what layout 3's
  ``Presence.deriver`` would do: ``derive``), against a raw ``ZMSCORE`` of the same ids, in
  alternating blocks; and 200 users with a status against 200 plain ones;
- ``sweep()`` of 10,000 users of a killed process among N, which its heartbeats no longer
  renew: their listing removed and their last seen indexed (``last``: offline users by last
  seen, trimmed to the metadata expiry), one call each per batch, an ``offline`` transition
  each, parsed by the store's own ``Transition.parse_many``; their registry entries are dead
  with the process's lease and left to the registry's cleaner. Beside it the costlier variant:
  each one's registry entry read (its last activity kept) and removed, and the last seen in a
  record of the user's own with the metadata expiry. Both against ``ZRANGEBYSCORE`` +
  ``ZREMRANGEBYSCORE`` of the same members in a copy of the set, median of 7, in turn.

A shape, not a store: no rooms, no second connection, no invisible users, no tenants. Not part of
``python -m bench``.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from typing import Any

import redis

from presence_app.store.types import SEP_BYTES, Presence, Transition
from presence_app.testing import RedisServer

from .common import latencies, rates
from .dataset import T0, conn_ids

TAG = "{p:0}:3"
SEEN, WEB, PROCS, RAW = f"{TAG}:seen", f"{TAG}:web", f"{TAG}:procs", "{p:0}:raw"
LAST = f"{TAG}:last"  # offline users by last seen
BUCKET, RECORD = f"{TAG}:c:", f"{TAG}:u:"
PER_BUCKET = 64  # under hash-max-listpack-entries (128): every bucket stays a listpack
PROCESSES = 100
LEASE_TTL, SPAN, META_TTL = 90.0, 90.0, 604800

# The registry bucket of a user: the same in Python and Lua (exact in doubles: < 2^37).
BUCKET_LUA = """
local function bucket(uid, n)
  local h = 0
  for i = 1, #uid do h = (h * 31 + string.byte(uid, i)) % 2147483647 end
  return h % n
end
"""


def bucket(uid: str, n: int) -> int:
    h = 0
    for b in uid.encode():
        h = (h * 31 + b) % 2147483647
    return h % n


# connect, for a batch: ARGV = now, buckets, then (user, process, conn) triples.
CONNECT = (
    BUCKET_LUA
    + """
local now, n = ARGV[1], tonumber(ARGV[2])
for i = 3, #ARGV, 3 do
  local uid = ARGV[i]
  redis.call('HSET', KEYS[2] .. bucket(uid, n), uid, ARGV[i + 1] .. '\\31' .. ARGV[i + 2] .. '\\31' .. now)
  redis.call('ZADD', KEYS[1], now, uid)
end
"""
)
# A process's heartbeat batch: its own lease, then one write of its users' last sign of life.
HEARTBEAT = """
redis.call('ZADD', KEYS[2], 'GT', ARGV[1], ARGV[2])
local users, now = {}, ARGV[3]
for i = 4, #ARGV do users[#users + 1] = now; users[#users + 1] = ARGV[i] end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(users))
"""
# get_many: ARGV[1] the ids joined by \n, ARGV[2] the buckets (0: no registry read). Returns the
# clock's stand-in, the seen scores, the records and (with the registry) the registry values.
GET_MANY = (
    BUCKET_LUA
    + """
local ids, keys = {}, {}
for uid in string.gmatch(ARGV[1], '[^\\n]+') do
  ids[#ids + 1] = uid; keys[#keys + 1] = KEYS[2] .. uid
end
local regs = {}
local n = tonumber(ARGV[2])
if n > 0 then
  for i, uid in ipairs(ids) do regs[i] = redis.call('HGET', KEYS[3] .. bucket(uid, n), uid) end
end
return {redis.call('ZMSCORE', KEYS[1], unpack(ids)), redis.call('MGET', unpack(keys)), regs}
"""
)
# get_many with the presence test made in the script: ARGV[1] the ids, ARGV[2] now - SPAN. Returns
# one character a user ("1": seen within SPAN), the seen scores and the records: Python then
# parses no score of an online user.
GET_MANY_TESTED = """
local ids, keys = {}, {}
for uid in string.gmatch(ARGV[1], '[^\\n]+') do
  ids[#ids + 1] = uid; keys[#keys + 1] = KEYS[2] .. uid
end
local seen, floor, flags = redis.call('ZMSCORE', KEYS[1], unpack(ids)), tonumber(ARGV[2]), {}
for i = 1, #ids do
  local s = seen[i]
  flags[i] = (s and tonumber(s) >= floor) and '1' or '0'
end
return {table.concat(flags), seen, redis.call('MGET', unpack(keys))}
"""
# sweep: KEYS seen, procs, the last-seen index; ARGV: now - SPAN, now, the dead process. 1,000
# users a call whose last sign of life is older than SPAN: listing removed and last seen indexed
# (one call each per batch), an offline each. Their registry entries are left to the cleaner
# (docs/store-layout-3.md: a dead process's entries are dead by its lease, and removed in bulk).
SWEEP = """
local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES',
  'LIMIT', 0, 1000)
local out, gone, last = {}, {}, {}
for i = 1, #rows, 2 do
  local uid, seen = rows[i], rows[i + 1]
  gone[#gone + 1] = uid
  last[#last + 1] = seen; last[#last + 1] = uid
  out[#out + 1] = 'offline\\31' .. uid .. '\\31\\31offline\\31' .. seen .. '\\31{"rooms":{}}'
end
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('ZADD', KEYS[3], unpack(last))
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (tonumber(ARGV[2]) - 604800))
end
if #gone < 1000 then redis.call('ZREM', KEYS[2], ARGV[3]) end
return {#gone, table.concat(out, '\\30')}
"""
# The same with the registry entry read (its last activity kept) and removed, and the last seen
# in a record of the user's own with the metadata expiry, per user: the costlier variant.
SWEEP_PER_USER = (
    BUCKET_LUA
    + """
local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES',
  'LIMIT', 0, 1000)
local n, reg, rec = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local out, gone = {}, {}
for i = 1, #rows, 2 do
  local uid, seen = rows[i], rows[i + 1]
  gone[#gone + 1] = uid
  local b = reg .. bucket(uid, n)
  local v = redis.call('HGET', b, uid)
  local la = v and string.match(v, '([^\\31]*)$') or ''
  redis.call('HDEL', b, uid)
  redis.call('SET', rec .. uid, '\\31' .. la .. '\\31' .. seen .. '\\31\\31\\31\\31\\31\\31\\31\\31\\31', 'EX', 604800)
  out[#out + 1] = 'offline\\31' .. uid .. '\\31\\31offline\\31' .. seen .. '\\31{"rooms":{}}'
end
if #gone > 0 then redis.call('ZREM', KEYS[1], unpack(gone)) end
if #gone < 1000 then redis.call('ZREM', KEYS[2], ARGV[3]) end
return {#gone, table.concat(out, '\\30')}
"""
)


def derive(ids: list[str], reply: list[Any], now: float) -> dict[str, Presence]:
    """What layout 3's Presence.deriver would do with the read: a user without a record is
    online (seen within SPAN) or offline; the registry's value, when read, gives the last
    activity; a record (status, idle, ...) would be split as types.py does today."""
    seen_, records, regs = reply
    new = object.__new__
    out = {}
    for uid, seen, raw, reg in zip(ids, seen_, records, regs or [None] * len(ids), strict=True):
        p = new(Presence)
        d = p.__dict__
        d["user_id"] = uid
        out[uid] = p
        if raw is None:
            if seen is not None and float(seen) + SPAN >= now:
                d["state"], d["last_seen"] = "online", now
            else:
                d["state"], d["last_seen"] = "offline", None
            d["last_active"] = float(reg.rpartition(SEP_BYTES)[2]) if reg else None
            d["message"] = d["emoji"] = d["device"] = ""
            d["meta"] = {}
            continue
        st, la, _, _, msg, emo, dev, _ = raw.split(SEP_BYTES, 7)
        online = seen is not None and float(seen) + SPAN >= now
        d["state"] = ("dnd" if st == b"dnd" else "online") if online else "offline"
        d["last_seen"] = now if online else None
        d["last_active"] = float(la) if la else None
        d["message"], d["emoji"], d["device"] = msg.decode(), emo.decode(), dev.decode()
        d["meta"] = {}
    return out


def derive_tested(ids: list[str], reply: list[Any], now: float) -> dict[str, Presence]:
    """derive() for GET_MANY_TESTED's reply: a plain online user's presence is one shared set
    of fields (one dict update), with no score parsed."""
    flags, seen_, records = reply
    online = {"state": "online", "last_seen": now, "last_active": None}
    plain = {"message": "", "emoji": "", "device": ""}
    new = object.__new__
    out = {}
    for uid, flag, seen, raw in zip(ids, flags, seen_, records, strict=True):
        p = new(Presence)
        d = p.__dict__
        d["user_id"] = uid
        out[uid] = p
        if flag == 49:  # "1"
            d.update(online)
        else:
            d["state"], d["last_active"] = "offline", None
            d["last_seen"] = float(seen) if seen else None
        if raw is None:
            d.update(plain)
            d["meta"] = {}
            continue
        st, la, _, _, msg, emo, dev, _ = raw.split(SEP_BYTES, 7)
        if st == b"dnd" and flag == 49:
            d["state"] = "dnd"
        d["last_active"] = float(la) if la else None
        d["message"], d["emoji"], d["device"] = msg.decode(), emo.decode(), dev.decode()
        d["meta"] = {}
    return out


def used(client: redis.Redis) -> int:
    time.sleep(1)  # let lazy frees settle
    return int(client.info("memory")["used_memory"])


def main(n: int) -> None:
    uids = [str(1_000_000 + i) for i in range(n)]
    buckets = max(1, n // PER_BUCKET)
    rng = random.Random(7)
    procs = [
        "P" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=7))
        for _ in range(PROCESSES)
    ]
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        connect = client.script_load(CONNECT)
        client.zadd(PROCS, dict.fromkeys(procs, T0 + LEASE_TTL))
        before = used(client)
        cids = conn_ids(n, seed=1)
        for i in range(0, n, 1000):
            args: list[Any] = [repr(T0), buckets]
            for j in range(i, min(i + 1000, n)):
                args += [uids[j], procs[j % PROCESSES], cids[j]]
            client.evalsha(connect, 2, SEEN, BUCKET, *args)
        ours = used(client) - before
        listing = int(client.memory_usage(SEEN, samples=0))
        before = used(client)
        for i in range(0, n, 10_000):
            client.zadd(RAW, dict.fromkeys(uids[i : i + 10_000], T0))
        bare = used(client) - before
        before = used(client)
        web_ids = [str(5_000_000 + i) for i in range(n)]  # HTTP-only users: their one entry
        for i in range(0, n, 1000):
            pipe = client.pipeline(transaction=False)
            for uid in web_ids[i : i + 1000]:
                pipe.zadd(WEB, {uid: T0})
            pipe.execute()
        web = used(client) - before
        # a 40-character status on 10,000 of the plain users: their record, created
        status_ids = rng.sample(uids, 10_000)
        message = "In a meeting until 3 pm, back at 3:15 ok"
        before = used(client)
        pipe = client.pipeline(transaction=False)
        for uid in status_ids:
            pipe.set(RECORD + uid, f"\x1f{T0!r}\x1f\x1f\x1f{message}\x1f\x1f\x1f\x1f\x1f\x1f\x1f")
        pipe.execute()
        status_bytes = (used(client) - before) / len(status_ids)
        print(
            f"memory per plain online user: {ours / n:.0f} B, bare sorted set {bare / n:.0f} B:"
            f" {ours / bare:.2f}x (the listing {listing / n:.0f} B, the registry and the rest"
            f" {(ours - listing) / n:.0f} B); per HTTP-only user {web / n:.0f} B:"
            f" {web / bare:.2f}x; a 40-character status adds {status_bytes:.0f} B"
            f" ({status_bytes / 40:.2f}x the message: a record of its own)"
        )
        client.delete(*[RECORD + uid for uid in status_ids])
        client.unlink(WEB)

        hb, clock, at = client.script_load(HEARTBEAT), [T0 + 1], {"ours": 0, "raw": 0}

        def batch(side: str) -> list[str]:
            i = at[side] = (at[side] + 1000) % n
            clock[0] += 0.03  # every user renewed once per 30 s of the clock
            return uids[i : i + 1000]

        def heartbeat() -> int:
            users = batch("ours")
            client.evalsha(
                hb, 2, SEEN, PROCS, repr(clock[0] + LEASE_TTL), procs[0], repr(clock[0]), *users
            )
            return len(users)

        def raw_zadd() -> int:
            users, now = batch("raw"), repr(clock[0])
            client.execute_command("ZADD", RAW, *[x for u in users for x in (now, u)])
            return len(users)

        r = rates({"ours": heartbeat, "raw": raw_zadd}, rounds=5, seconds=1.5)
        o, w = r["ours"]["median"], r["raw"]["median"]
        print(f"heartbeat batch 1,000: {o:,.0f}/s, raw ZADD {w:,.0f}/s: {o / w:.2f}x")

        gm = client.script_load(GET_MANY)
        sets = [rng.sample(uids, 200) for _ in range(64)]
        status_sets = [rng.sample(uids, 200) for _ in range(64)]
        pipe = client.pipeline(transaction=False)
        for ids in status_sets:
            for uid in ids:
                pipe.set(
                    RECORD + uid,
                    f"\x1f{T0!r}\x1f\x1f\x1fIn a meeting until 3 pm\x1f📅\x1fFirefox on Linux"
                    "\x1f\x1f\x1f\x1f\x1f",
                )
        pipe.execute()
        joined = ["\n".join(ids) for ids in sets]
        status_joined = ["\n".join(ids) for ids in status_sets]
        now = clock[0]
        turn = dict.fromkeys(
            ("reads", "la", "derived", "la derived", "status", "raw", "tested", "tested status"),
            0,
        )
        gmt = client.script_load(GET_MANY_TESTED)
        floor = repr(now - SPAN)

        def tested(texts: list[str], id_sets: list[list[str]], side: str) -> None:
            i = pick(side)
            found = derive_tested(
                id_sets[i], client.evalsha(gmt, 2, SEEN, RECORD, texts[i], floor), now
            )
            for p in found.values():
                p.state, p.emoji, p.message  # noqa: B018

        def pick(side: str) -> int:
            turn[side] = (turn[side] + 1) % len(sets)
            return turn[side]

        def read(i: int, with_la: bool, texts: list[str] = joined) -> Any:
            return client.evalsha(gm, 3, SEEN, RECORD, BUCKET, texts[i], buckets if with_la else 0)

        def derived(with_la: bool) -> None:
            i = pick("la derived" if with_la else "derived")
            found = derive(sets[i], read(i, with_la), now)
            for p in found.values():
                p.state, p.emoji, p.message  # noqa: B018

        def status() -> None:
            i = pick("status")
            found = derive(status_sets[i], read(i, False, status_joined), now)
            for p in found.values():
                p.state, p.emoji, p.message  # noqa: B018

        check = derive(sets[0], read(0, True), now)
        tested_check = derive_tested(
            sets[0], client.evalsha(gmt, 2, SEEN, RECORD, joined[0], floor), now
        )
        if tested_check != derive(sets[0], read(0, False), now):
            raise RuntimeError("the two derivations differ")
        if not all(p.state == "online" and p.last_active == T0 for p in check.values()):
            raise RuntimeError("the read does not find the users online")
        lat = latencies(
            {
                "reads": lambda: read(pick("reads"), False),
                "la": lambda: read(pick("la"), True),
                "derived": lambda: derived(False),
                "la derived": lambda: derived(True),
                "status": status,
                "tested": lambda: tested(joined, sets, "tested"),
                "tested status": lambda: tested(status_joined, status_sets, "tested status"),
                "raw": lambda: client.zmscore(RAW, sets[pick("raw")]),
            },
            10_000,
        )
        w = lat["raw"]
        print(f"raw ZMSCORE of 200: p50 {w['p50_ms']:.3f} ms, p99 {w['p99_ms']:.3f} ms")
        for name, label in (
            ("reads", "reads (ZMSCORE + MGET), no derivation"),
            ("la", "reads + the registry's last activity, no derivation"),
            ("derived", "reads, derived, a dot's fields read"),
            ("la derived", "reads + last activity, derived, a dot's fields read"),
            ("status", "200 users with a status: reads, derived, a dot's fields read"),
            ("tested", "reads with the presence test in the script, derived, a dot's fields read"),
            ("tested status", "the same, 200 users with a status"),
        ):
            o = lat[name]
            print(
                f"get_many(200) {label}: p50 {o['p50_ms']:.3f} ms, p99 {o['p99_ms']:.3f} ms:"
                f" {o['p99_ms'] / w['p99_ms']:.2f}x raw at p99, {o['p50_ms'] / w['p50_ms']:.2f}x"
                " at p50"
            )
        s, d = lat["status"], lat["derived"]
        print(f"with a status / plain, p50: {s['p50_ms'] / d['p50_ms']:.2f}x")
        s, d = lat["tested status"], lat["tested"]
        print(
            f"with a status / plain, presence tested in the script, p50: {s['p50_ms'] / d['p50_ms']:.2f}x"
        )
        client.delete(*[RECORD + uid for ids in status_sets for uid in ids])

        sweeps = {
            "batched": client.script_load(SWEEP),
            "per user": client.script_load(SWEEP_PER_USER),
        }
        stale = [f"x{i}" for i in range(10_000)]
        stale_cids = conn_ids(10_000, seed=99)
        dead = "Pdeadbeef"
        ms: dict[str, list[float]] = {"batched": [], "per user": [], "raw": []}
        raw_copy = "{p:0}:raw:sweep"
        gc.freeze()
        try:
            for rep in range(7):
                for name, sha in sweeps.items():
                    # a killed process's users: last renewed 200 s ago; its lease ran out
                    args: list[Any] = [repr(T0 - 200), buckets]
                    for uid, cid in zip(stale, stale_cids, strict=True):
                        args += [uid, dead, cid]
                    for i in range(0, len(args) - 2, 3000):
                        client.evalsha(
                            connect, 2, SEEN, BUCKET, *args[:2], *args[2 + i : 2 + i + 3000]
                        )
                    client.zadd(PROCS, {dead: T0 - 200 + LEASE_TTL})
                    if rep == 0 and name == "batched":
                        client.execute_command("ZUNIONSTORE", raw_copy, 1, SEEN)
                    t0, evicted, transitions = time.perf_counter(), 0, 0
                    while True:
                        count, text = client.evalsha(
                            sha,
                            3,
                            SEEN,
                            PROCS,
                            LAST,
                            repr(T0 - SPAN),
                            repr(T0),
                            dead,
                            buckets,
                            BUCKET,
                            RECORD,
                        )
                        evicted += count
                        transitions += len(Transition.parse_many(text))
                        if count < 1000:
                            break
                    ms[name].append((time.perf_counter() - t0) * 1000)
                    if evicted != len(stale) or transitions != len(stale):
                        raise RuntimeError(f"evicted {evicted}, {transitions} transitions")
                    if client.zscore(LAST, stale[0]) is None and name == "batched":
                        raise RuntimeError("the sweep kept no last seen")
                    client.delete(LAST, *[RECORD + uid for uid in stale])
                t0 = time.perf_counter()
                pipe = client.pipeline(transaction=True)
                pipe.zrangebyscore(raw_copy, "-inf", f"({T0 - SPAN}", withscores=True)
                pipe.zremrangebyscore(raw_copy, "-inf", f"({T0 - SPAN}")
                got, removed = pipe.execute()
                ms["raw"].append((time.perf_counter() - t0) * 1000)
                if removed != len(stale):
                    raise RuntimeError(f"raw sweep removed {removed}")
                client.zadd(raw_copy, dict(got))
        finally:
            gc.unfreeze()
        w = statistics.median(ms["raw"])
        print(f"raw ZRANGEBYSCORE + ZREMRANGEBYSCORE of 10,000 among {n:,}: median {w:.1f} ms")
        for name, label in (
            (
                "batched",
                "listing and last seen one call each per batch, registry left to the cleaner",
            ),
            ("per user", "registry entry read and removed, last seen in a record, per user"),
        ):
            o = statistics.median(ms[name])
            print(
                f"sweep of 10,000 of a killed process ({label}): median {o:.1f} ms"
                f" ({min(ms[name]):.0f}-{max(ms[name]):.0f}): {o / w:.2f}x raw"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
