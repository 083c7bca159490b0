"""4. ``sweep()`` evicting 10 k expired leases among 1 M users, emitting every transition.

The 1 M users connected at T0 hold live leases; 10 k more users connected 100 s earlier hold
leases that ran out 10 s ago (one socket each, as a crashed process leaves them). ``Store.sweep``
at T0 + 1 must evict exactly those and announce each one's ``offline``. Repeated: the 10 k are
connected again (at the earlier clock) before each sweep, so the population is the same each time.

Baseline: the least a sweeper could ask of Redis: read the expired members of a bare copy of the
lease set and remove them (ZRANGEBYSCORE + ZREMRANGEBYSCORE in one round trip).
"""

from __future__ import annotations

import gc

from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark, median, timed
from .dataset import T0, bulk_connect, conn_ids, population

EXPIRED_AT = T0 - 100  # connected then: the lease ran out at T0 - 10
RAW_KEY = "bench:raw:sweep"

#: The floor of a layout-2 eviction: the expired leases read and removed, each user's record read
#: and written back with its expiry, their index entries removed, one call per 1,000 leases, and
#: nothing else (no logic, no transitions). KEYS: leases, seen, active; ARGV: now, record prefix.
FLOOR = """
local more = 0
repeat
  local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, 1000)
  if #expired == 0 then break end
  local users = {}
  for i, m in ipairs(expired) do
    local uid = string.match(m, '^(.*)|')
    users[i] = uid
    local key = ARGV[2] .. uid
    redis.call('SET', key, redis.call('GET', key), 'EX', 604800)
  end
  redis.call('ZREM', KEYS[1], unpack(expired))
  redis.call('ZREM', KEYS[2], unpack(users))
  redis.call('ZREM', KEYS[3], unpack(users))
  more = more + #expired
until false
return more
"""


@benchmark("sweep", "4. sweep() evicting 10 k expired leases among 1 M, store layout 2")
def run(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    expired = ctx.size(10_000, 10_000)
    repeats = ctx.size(7, 2)
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    tag = store.keys.tag(0)
    stale = [(cid, f"x{i}") for i, cid in enumerate(conn_ids(expired, seed=99))]
    now = T0 + 1
    ours: list[float] = []
    raw: list[float] = []
    floor: list[float] = []
    floor_sha = client.script_load(FLOOR)
    counts: list[dict[str, int]] = []
    # The benchmark's own million-user lists out of the collector's sight: a full collection
    # due by chance would walk them inside a timed sweep. What a sweep allocates is still
    # collected as it would be.
    gc.freeze()
    try:
        for rep in range(repeats):
            bulk_connect(store, stale, EXPIRED_AT)
            if rep == 0:
                # The raw side's lease set: a copy of ours (1 M live + the 10 k expired), made
                # once; after each raw sweep only the expired members are put back.
                client.execute_command("ZUNIONSTORE", RAW_KEY, 1, KeySpace.leases(tag))
                # Nothing else is due: the live users are neither expired nor idle at `now`.
                due = client.zcount(KeySpace.leases(tag), "-inf", f"({now}")
                if due != expired:
                    raise RuntimeError(f"{due} leases due, expected {expired}")
            seconds, transitions = timed(lambda: store.sweep(now=now))
            ours.append(seconds * 1000)
            kinds: dict[str, int] = {}
            for t in transitions:
                kinds[t.kind] = kinds.get(t.kind, 0) + 1
            counts.append(kinds)
            offline = {t.user_id for t in transitions if t.kind == "offline"}
            if (
                len(offline) != expired
                or kinds.get("offline") != expired
                or len(transitions) != expired
            ):
                raise RuntimeError(f"sweep announced {kinds}, expected {expired} offline")
            span = max(store.config.lease_ttl, store.config.online_window)
            if (
                client.zcount(KeySpace.leases(tag), "-inf", f"({now}")
                or client.zcount(KeySpace.seen(tag), "-inf", f"({now - span}")
                or client.zcard(KeySpace.until(tag))
            ):
                raise RuntimeError("sweep left expired entries behind")
            if client.zcard(KeySpace.seen(tag)) != n:
                raise RuntimeError("sweep evicted a live user")

            def raw_sweep() -> list:
                pipe = client.pipeline(transaction=True)
                pipe.zrangebyscore(RAW_KEY, "-inf", f"({now}", withscores=True)
                pipe.zremrangebyscore(RAW_KEY, "-inf", f"({now}")
                return pipe.execute()

            seconds, (got, removed) = timed(raw_sweep)
            if removed != expired:
                raise RuntimeError(f"raw sweep removed {removed}")
            raw.append(seconds * 1000)
            client.zadd(RAW_KEY, dict(got))

            bulk_connect(store, stale, EXPIRED_AT)
            keys = (KeySpace.leases(tag), KeySpace.seen(tag), KeySpace.active(tag))
            seconds, evicted = timed(
                lambda k=keys: client.evalsha(floor_sha, 3, *k, now, KeySpace.user(tag, ""))
            )
            if evicted != expired:
                raise RuntimeError(f"the floor script evicted {evicted}")
            floor.append(seconds * 1000)
            ctx.log(
                f"sweep {rep + 1}/{repeats}: {ours[-1]:.1f} ms (raw {raw[-1]:.1f} ms, "
                f"floor {floor[-1]:.1f} ms)"
            )
    finally:
        gc.unfreeze()
        client.unlink(RAW_KEY)
        # The swept users keep their record (their last seen), as the store keeps it: drop them
        # so that later benchmarks see the population they expect.
        client.delete(*[KeySpace.user(tag, uid) for _, uid in stale])
    o, r, f = median(ours), median(raw), median(floor)
    return [
        Row(
            bench="4 sweep",
            metric=f"sweep() of {expired:,} expired among {n:,} (median of {repeats})",
            ours=o,
            unit="ms",
            baseline=r,
            baseline_label="ZRANGEBYSCORE+ZREMRANGEBYSCORE",
            checks=[
                Check("<= 100 ms", o, "<=", 100.0),
                Check("every transition", counts[-1].get("offline", 0), ">=", expired),
            ],
            details={
                "population": n,
                "expired": expired,
                "sweep_batch": store.config.sweep_batch,
                "ours_ms": ours,
                "raw_ms": raw,
                "max_ms": max(ours),
                "transitions": counts,
            },
        ),
        Row(
            bench="4 sweep",
            metric=f"the layout's floor: GET + SET per evicted user, removals batched (median of {repeats})",
            ours=f,
            unit="ms",
            baseline=r,
            baseline_label="ZRANGEBYSCORE+ZREMRANGEBYSCORE",
            details={"floor_ms": floor, "ours_over_floor": o / f},
        ),
    ]
