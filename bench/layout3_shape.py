"""The shape of a layout 3 (not built), against the raw baselines of ``python -m bench``.

``python -m bench.layout3_shape [N]`` (default 1,000,000 users) measures what the store's four
missed figures (issue 13) would cost in the layout docs/benchmarks.md sketches under "What would
reach them": one sorted set per shard scored by a user's last sign of life, which is also the
lease of their connections (a process renews one lease for all its sockets), a registry of
connections in small hashes Redis keeps as listpacks (~64 users a bucket), and the activity index
that idle needs (user -> last activity, until the sweep announces them idle: what the store's
``active`` set is). N plain online users (one connection, no room, no status) are built user by
user, their registry entry written in between, as a store would write them. Then, side by side
with the raw command each target names:

- memory per user against a bare sorted set of the same ids, with and without the activity
  index;
- a heartbeat batch of 1,000 (the process's lease, one ``ZADD XX GT CH`` of its users) against a
  raw ``ZADD`` of the same batch, in alternating rounds;
- the reads of ``get_many(200)`` (a ``ZMSCORE`` of the listing, one of the activity index, and
  an ``MGET`` of the records, which plain users do not have) against a raw ``ZMSCORE``, in
  alternating blocks, without the derivation in Python that the store adds (~0.2 ms for 200);
  and the same reads without the activity index, the shape as first sketched;
- ``sweep()`` of 10,000 users of a dead process among N: each one's registry entry, listing and
  activity removed, their last seen written with an expiry, a transition each, parsed.

It is a measurement of a shape, not a store: no rooms, no second connection, no invisible users,
no HTTP windows; what those cost is what building layout 3 would find out. Not part of
``python -m bench``.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

import redis

from presence_app.testing import RedisServer

from .common import latencies, rates
from .dataset import T0, conn_ids

SEEN, ACTIVE, PROCS, RAW = "{p:0}:3:seen", "{p:0}:3:active", "{p:0}:3:procs", "{p:0}:raw"
BUCKET, RECORD = "{p:0}:3:c:", "{p:0}:3:u:"
PER_BUCKET = 64  # under hash-max-listpack-entries (128): every bucket stays a listpack

# Per user: their one connection in the registry, their listing, and (KEYS[2], when given)
# their last activity.
CONNECT = """
for i = 2, #ARGV, 3 do
  redis.call('HSET', ARGV[i + 2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
  if KEYS[2] then redis.call('ZADD', KEYS[2], ARGV[1], ARGV[i]) end
end
"""
# A process's heartbeat batch: its own lease, then one write of its users' last sign of life.
HEARTBEAT = """
redis.call('ZADD', KEYS[2], 'GT', ARGV[1], ARGV[2])
local users, now = {}, ARGV[3]
for i = 4, #ARGV do users[#users + 1] = now; users[#users + 1] = ARGV[i] end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(users))
"""
# KEYS[2]: the records' key base; KEYS[3], when given: the activity index.
GET_MANY = """
local keys = {}
for i = 1, #ARGV do keys[i] = KEYS[2] .. ARGV[i] end
local active = KEYS[3] and redis.call('ZMSCORE', KEYS[3], unpack(ARGV)) or {}
return {redis.call('ZMSCORE', KEYS[1], unpack(ARGV)), active, redis.call('MGET', unpack(keys))}
"""
# 1,000 expired users a call: registry entry and listing removed, last seen kept for 7 days.
SWEEP = """
local rows = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'WITHSCORES',
  'LIMIT', 0, 1000)
local out, gone = {}, {}
for i = 1, #rows, 2 do
  local uid, seen = rows[i], rows[i + 1]
  gone[#gone + 1] = uid
  redis.call('HDEL', ARGV[2] .. (tonumber(string.sub(uid, 2)) % tonumber(ARGV[3])), uid)
  redis.call('SET', ARGV[4] .. uid, '\\31\\31' .. seen, 'EX', 604800)
  out[#out + 1] = 'offline\\31' .. uid .. '\\31\\31offline\\31' .. seen .. '\\31{"rooms":{}}'
end
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('ZREM', KEYS[2], unpack(gone))
end
return {#gone, table.concat(out, '\\30')}
"""


def used(client: redis.Redis) -> int:
    time.sleep(1)  # let lazy frees settle
    return int(client.info("memory")["used_memory"])


def main(n: int) -> None:
    uids = [str(1_000_000 + i) for i in range(n)]
    buckets = max(1, n // PER_BUCKET)
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        connect = client.script_load(CONNECT)
        before = used(client)
        cids = conn_ids(n, seed=1)
        for i in range(0, n, 1000):
            args = [repr(T0)]
            for j in range(i, min(i + 1000, n)):
                args += [uids[j], cids[j], f"{BUCKET}{j % buckets}"]
            client.evalsha(connect, 2, SEEN, ACTIVE, *args)
        ours = used(client) - before
        activity = int(client.memory_usage(ACTIVE, samples=0))
        before = used(client)
        for i in range(0, n, 10_000):
            client.zadd(RAW, dict.fromkeys(uids[i : i + 10_000], T0))
        bare = used(client) - before
        print(
            f"memory per plain online user: {ours / n:.0f} B, bare sorted set {bare / n:.0f} B:"
            f" {ours / bare:.2f}x; of which the activity index {activity / n:.0f} B; without it"
            f" {(ours - activity) / n:.0f} B: {(ours - activity) / bare:.2f}x"
        )

        hb, clock, at = client.script_load(HEARTBEAT), [T0 + 1], {"ours": 0, "raw": 0}

        def batch(side: str) -> list[str]:
            i = at[side] = (at[side] + 1000) % n
            clock[0] += 0.03  # every user renewed once per 30 s of the clock
            return uids[i : i + 1000]

        def heartbeat() -> int:
            users = batch("ours")
            client.evalsha(hb, 2, SEEN, PROCS, repr(clock[0] + 90), "p1", repr(clock[0]), *users)
            return len(users)

        def raw_zadd() -> int:
            users, now = batch("raw"), repr(clock[0])
            client.execute_command("ZADD", RAW, *[x for u in users for x in (now, u)])
            return len(users)

        r = rates({"ours": heartbeat, "raw": raw_zadd}, rounds=5, seconds=1.5)
        o, w = r["ours"]["median"], r["raw"]["median"]
        print(f"heartbeat batch 1,000: {o:,.0f}/s, raw ZADD {w:,.0f}/s: {o / w:.2f}x")

        gm, rng = client.script_load(GET_MANY), random.Random(2)
        sets, turn = (
            [rng.sample(uids, 200) for _ in range(64)],
            dict.fromkeys(("ours", "no activity", "raw"), 0),
        )

        def pick(side: str) -> list[str]:
            turn[side] = (turn[side] + 1) % len(sets)
            return sets[turn[side]]

        lat = latencies(
            {
                "ours": lambda: client.evalsha(gm, 3, SEEN, RECORD, ACTIVE, *pick("ours")),
                "no activity": lambda: client.evalsha(gm, 2, SEEN, RECORD, *pick("no activity")),
                "raw": lambda: client.zmscore(RAW, pick("raw")),
            },
            10_000,
        )
        w = lat["raw"]
        print(f"raw ZMSCORE of 200: p50 {w['p50_ms']:.3f} ms, p99 {w['p99_ms']:.3f} ms")
        for name, label in (("ours", "with activity"), ("no activity", "without activity")):
            o = lat[name]
            print(
                f"get_many(200) reads {label}, no derivation: p50 {o['p50_ms']:.3f} ms, p99"
                f" {o['p99_ms']:.3f} ms: {o['p99_ms'] / w['p99_ms']:.2f}x raw at p99"
            )

        sweep, stale, runs = client.script_load(SWEEP), [f"x{i}" for i in range(10_000)], []
        for _ in range(7):
            for i, uid in enumerate(stale):  # a dead process's users: listed 200 s ago
                client.hset(f"{BUCKET}{i % buckets}", uid, "c")
            client.zadd(SEEN, dict.fromkeys(stale, T0 - 200))
            client.zadd(ACTIVE, dict.fromkeys(stale, T0 - 200))
            t0, evicted, transitions = time.perf_counter(), 0, 0
            while True:
                count, text = client.evalsha(
                    sweep, 2, SEEN, ACTIVE, repr(T0 - 90), BUCKET, buckets, RECORD
                )
                evicted += count
                transitions += len([line.split(b"\x1f") for line in text.split(b"\x1e") if line])
                if count < 1000:
                    break
            runs.append((time.perf_counter() - t0) * 1000)
            if evicted != len(stale) or transitions != len(stale):
                raise RuntimeError(f"evicted {evicted}, {transitions} transitions")
        print(
            f"sweep of 10,000 expired among {n:,}: median {statistics.median(runs):.1f} ms"
            f" ({min(runs):.0f}-{max(runs):.0f})"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
