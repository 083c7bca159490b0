"""5. Redis memory per online user (one socket, no rooms, no metadata) at 1 M users, against a
bare sorted set of the same ids; and what a status message adds to a user.

Ours: INFO used_memory before and after connecting the population (recorded when it was filled,
before any other benchmark touched it). Bare: used_memory before and after one ZADD per 10 k of
the same user ids into a fresh key. The breakdown per structure comes from MEMORY USAGE (every
member of the sorted sets, a sample of the user hashes); what is left is the keyspace's own
hash table and the allocator's rounding, which MEMORY USAGE does not count per key.

For information, the layout's floor, measured the same way in the same run: used_memory growth
for a bare copy of the lease set ("user|conn" members by expiry) and one of the seen index (user
ids by time) of the same population. Every online user of layout 2 is in both, whatever else
the store keeps: a missed target is shown against what those two sets alone cost.
"""

from __future__ import annotations

import random
from itertools import repeat

from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark
from .dataset import T0, population, settle, used_memory

BARE_KEY = "bench:raw:ids"
FLOOR_LEASES, FLOOR_SEEN = "{bench:floor}:mem:leases", "{bench:floor}:mem:seen"


def memory_usage(client, key: str, samples: int = 0) -> int:
    return int(client.execute_command("MEMORY", "USAGE", key, "SAMPLES", samples) or 0)


@benchmark("memory", "5. Redis memory per online user vs a bare sorted set of the ids, layout 2")
def run(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    pop = population(ctx, n, "b1m")
    client, tag = pop.client, pop.store.keys.tag(0)
    ours_total = pop.memory_after - pop.memory_before
    ours = ours_total / n

    client.delete(BARE_KEY)
    settle(client)
    before = used_memory(client)
    for i in range(0, n, 10_000):
        client.zadd(BARE_KEY, dict(zip(pop.uids[i : i + 10_000], repeat(T0 + 90))))
    bare_total = used_memory(client) - before
    bare = bare_total / n
    bare_usage = memory_usage(client, BARE_KEY)
    client.unlink(BARE_KEY)

    # The floor: the two sorted sets every online user is in, built like the bare one (one ZADD
    # per 10 k, fresh keys) with the store's members and scores, nothing else.
    members = pop.lease_members()
    client.delete(FLOOR_LEASES, FLOOR_SEEN)
    settle(client)  # the bare set's UNLINK must not free memory during this measurement
    before = used_memory(client)
    for i in range(0, n, 10_000):
        client.zadd(FLOOR_LEASES, dict(zip(members[i : i + 10_000], repeat(T0 + 90))))
        client.zadd(FLOOR_SEEN, dict(zip(pop.uids[i : i + 10_000], repeat(T0))))
    floor_total = used_memory(client) - before
    floor = floor_total / n
    floor_usage = {
        name: memory_usage(client, key) / n
        for name, key in (("leases", FLOOR_LEASES), ("seen", FLOOR_SEEN))
    }
    client.unlink(FLOOR_LEASES, FLOOR_SEEN)

    # Where our bytes go. The population's structures only (the listings benchmark may have added
    # a room since the fill; its few keys are not counted here).
    indexes = {
        "leases": KeySpace.leases(tag),
        "seen": KeySpace.seen(tag),
        "active": KeySpace.active(tag),
        "until": KeySpace.until(tag),
    }
    parts: dict[str, float] = {}
    for name, key in indexes.items():
        parts[f"{name} sorted set"] = memory_usage(client, key) / n
    sample = random.Random(5).sample(pop.uids, 2000)
    records = [memory_usage(client, KeySpace.user(tag, uid)) for uid in sample]
    parts["user record (key, string)"] = sum(records) / len(records)
    # used_memory minus MEMORY USAGE: the keyspace hash table, allocator rounding, expires
    parts["rest (keyspace table, allocator)"] = ours - sum(parts.values())
    encodings = {
        name: (client.object("encoding", key) or b"-").decode() for name, key in indexes.items()
    }
    encodings["user record"] = client.object("encoding", KeySpace.user(tag, pop.uids[0])).decode()
    sample_record = client.get(KeySpace.user(tag, pop.uids[0])).decode()

    # A status costs what it says: MEMORY USAGE of records before and after a 40-character
    # message on 200 users (then cleared again).
    message = "m" * 40
    users = sample[:200]
    before_status = sum(memory_usage(client, KeySpace.user(tag, uid)) for uid in users)
    for uid in users:
        pop.store.set_status(uid, message=message, now=pop.t0)
    with_status = sum(memory_usage(client, KeySpace.user(tag, uid)) for uid in users)
    for uid in users:
        pop.store.set_status(uid, message="", now=pop.t0)
    status_cost = (with_status - before_status) / len(users)
    ctx.log(
        f"memory: ours {ours:.0f} B/user, bare sorted set {bare:.0f} B/id,"
        f" floor (leases + seen) {floor:.0f} B/user"
    )
    return [
        Row(
            bench="5 memory",
            metric=f"bytes per online user, {n:,} users",
            ours=ours,
            unit="B",
            baseline=bare,
            baseline_label="bare ZSET",
            checks=[Check("<= 2x bare", ours / bare, "<=", 2.0)],
            details={
                "population": n,
                "ours_total_bytes": ours_total,
                "bare_total_bytes": bare_total,
                "bare_memory_usage_per_id": bare_usage / n,
                "breakdown_bytes_per_user": {k: round(v, 1) for k, v in parts.items()},
                "encodings": encodings,
                "user_record_sample": sample_record,
                "floor_bytes_per_user": floor,
            },
        ),
        Row(
            bench="5 memory",
            metric="the layout's floor: the lease set + the seen index alone, no record,"
            " no active index",
            ours=floor,
            unit="B",
            baseline=bare,
            baseline_label="bare ZSET",
            details={
                "population": n,
                "floor_total_bytes": floor_total,
                "bare_total_bytes": bare_total,
                "floor_memory_usage_per_user": floor_usage,
                "ours_over_floor": ours / floor,
            },
        ),
        Row(
            bench="5 memory",
            metric="bytes a 40-character status message adds to a user",
            ours=status_cost,
            unit="B",
            baseline=len(message),
            baseline_label="the message",
            checks=[Check("<= 1.5x the message", status_cost / len(message), "<=", 1.5)],
            details={
                "users": len(users),
                "record_bytes_before": before_status / len(users),
                "record_bytes_with_status": with_status / len(users),
            },
        ),
    ]
