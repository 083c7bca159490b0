"""Issue 43, eighth session: a layout not tried, probed — one hash field a user, read by HMGET.

``python -m bench.field43_proto [--users N] [--rounds N]`` measures, on a private Redis and a
synthetic site (60 % socket users, 30 % HTTP-only, 10 % with a status, as benchmark 2's), the
premises of a layout whose read of a page is one ``HMGET``: every listed user has one field in a
hash, holding a copy of their score (the registry's part beside it for a socket user, their
record for a status user, their web score for an HTTP-only one), while the sorted set of scores
stays as the sweep's and the listings' index. The store is not changed.

- **Reads**: Redis' own time a call (INFO commandstats, alternating blocks, the median of the
  rounds) and the wall p50 / p99 (``bench.common.latencies``) of the raw ``ZMSCORE`` of a page's
  200 ids against the raw ``HMGET`` of their fields (the reply as redis-py parses it; no
  derivation), for each kind of page. Redis 7.0 formats every score of a ``ZMSCORE`` reply as
  text; a field is sent as it is stored.
- **Memory**: the bytes a user of each kind adds to the hash (``used_memory`` before and after
  each kind is written), against a member of the bare sorted set.
- **Heartbeats**: Redis' own time of a batch of 1,000 connected users: the write of today's
  layout alone (``ZADD XX GT CH`` in a script), and the same renewing the copy in each user's
  field (``HMGET``, the copy put in front, ``HSET``) for every user of the batch or every other
  one (a copy renewed every other beat stays within a lease of the score at the defaults).
"""

from __future__ import annotations

import argparse
import json
import random
import time

from .common import RedisFixture, latencies, median, walls_us
from .front_door import commandstat

#: A status user's record as the store writes one (fields joined by \x1f), without its copy.
RECORD = "dnd\x1f1764300000.5\x1f\x1f\x1fin a meeting\x1f:calendar:\x1f\x1f\x1f\x1f\x1f\x1f"
KINDS = ("socket", "web", "status", "mixed")

BEAT_FLOOR = """
local t = redis.call('TIME')
local now = string.format('%.6f', t[1] + t[2] / 1e6)
local a = {}
for i = 1, #ARGV do a[2 * i - 1] = now; a[2 * i] = ARGV[i] end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(a))
"""
# the same, then each due user's copy (the field's first 20 characters) renewed
BEAT_COPIES = (
    BEAT_FLOOR.replace(
        "return redis.call",
        "local moved = redis.call",
    )
    + """
local due = {}
for i = 1, #ARGV, tonumber(KEYS[3]) do due[#due + 1] = ARGV[i] end
local fields = redis.call('HMGET', KEYS[2], unpack(due))
local copy = string.format('%020.6f', t[1] + t[2] / 1e6 - 0.000001)
local w = {}
for i = 1, #due do
  local f = fields[i]
  if f then w[#w + 1] = due[i]; w[#w + 1] = copy .. string.sub(f, 21) end
end
if #w > 0 then redis.call('HSET', KEYS[2], unpack(w)) end
return moved
"""
)


def field_of(kind: str, i: int, score: float) -> str:
    if kind == "web":
        return f"-{score:.6f}"
    copy = f"{score - 0.000001:020.6f}"
    if kind == "status":
        return f"{copy}\x1f{RECORD}"
    return f"{copy}\x1fproc-{i % 8}\x1fc{i}\x1f{score:.6f}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.field43_proto")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4000, help="wall-time calls a side and kind")
    args = parser.parse_args()
    rng = random.Random(43)
    fixture = RedisFixture().start()
    try:
        r = fixture.client()
        now = time.time()
        n = args.users
        kinds = ["socket"] * (n * 6 // 10) + ["web"] * (n * 3 // 10)
        kinds += ["status"] * (n - len(kinds))
        ids = [str(10_000_000 + i) for i in range(n)]
        by_kind: dict[str, list[str]] = {"socket": [], "web": [], "status": []}
        for uid, kind in zip(ids, kinds, strict=True):
            by_kind[kind].append(uid)
        # the bare sorted set (the raw side), the index and the fields, each kind's in turn
        mem: dict[str, float] = {}
        base = r.info("memory")["used_memory"]
        for members in by_kind.values():
            for s in range(0, len(members), 10_000):
                r.zadd("bare", {u: now - rng.random() * 30 for u in members[s : s + 10_000]})
        mem["bare sorted set"] = (r.info("memory")["used_memory"] - base) / n
        for k, members in by_kind.items():
            before = r.info("memory")["used_memory"]
            scores = dict(zip(members, r.zmscore("bare", members), strict=True))
            for s in range(0, len(members), 10_000):
                chunk = members[s : s + 10_000]
                r.hset("u", mapping={u: field_of(k, s + j, scores[u]) for j, u in enumerate(chunk)})
            mem[k] = (r.info("memory")["used_memory"] - before) / len(members)
        shuffled = ids[:]
        rng.shuffle(shuffled)
        pages = {k: [rng.sample(v, 200) for _ in range(64)] for k, v in by_kind.items()}
        pages["mixed"] = [shuffled[i * 200 : i * 200 + 200] for i in range(64)]

        # reads: Redis' own time, alternating blocks
        sides = {
            "ZMSCORE": ("zmscore", lambda pg: r.zmscore("bare", pg)),
            "HMGET": ("hmget", lambda pg: r.hmget("u", pg)),
        }
        own: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for kind in KINDS:
                for side, (command, fn) in sides.items():
                    c0, u0 = commandstat(r, command)
                    for pg in pages[kind] * 3:
                        fn(pg)
                    c1, u1 = commandstat(r, command)
                    own.setdefault((kind, side), []).append((u1 - u0) / (c1 - c0))
        walls = {}
        for kind in KINDS:
            it = {side: iter(pages[kind] * (args.calls // 64 + 2)) for side in sides}
            walls[kind] = latencies(
                {side: (lambda fn=fn, i=it[side]: fn(next(i))) for side, (_, fn) in sides.items()},
                args.calls,
            )

        # heartbeats: a batch of 1,000 socket users, Redis' own time a batch
        floor, copies = r.script_load(BEAT_FLOOR), r.script_load(BEAT_COPIES)
        r.zadd(
            "seen", dict(zip(by_kind["socket"], r.zmscore("bare", by_kind["socket"]), strict=True))
        )
        beats = {
            "floor (ZADD XX GT CH)": lambda b: r.evalsha(floor, 1, "seen", *b),
            "+ copies, every user": lambda b: r.evalsha(copies, 3, "seen", "u", "1", *b),
            "+ copies, every other user": lambda b: r.evalsha(copies, 3, "seen", "u", "2", *b),
        }
        beat: dict[str, list[float]] = {}
        names = list(beats)
        for turn in range(args.rounds * 3):
            # each variant first in turn, on batches of its own: a batch's users, once moved to
            # the set's end, would be cheaper to move again for the variant after
            for name in names[turn % 3 :] + names[: turn % 3]:
                fn = beats[name]
                batches = [rng.sample(by_kind["socket"], 1000) for _ in range(20)]
                c0, u0 = commandstat(r, "evalsha")
                for b in batches:
                    fn(b)
                c1, u1 = commandstat(r, "evalsha")
                beat.setdefault(name, []).append((u1 - u0) / (c1 - c0))

        out = {
            "memory_bytes_a_user": mem,
            "reads_own_us": {f"{k} {s}": median(v) for (k, s), v in own.items()},
            "reads_wall_us": walls_us(walls),
            "heartbeat_own_us_a_batch_of_1000": {k: median(v) for k, v in beat.items()},
        }
        print(json.dumps(out, indent=1))
        print(
            "\n| page of 200 | ZMSCORE: Redis' own time; wall p50 / p99 | HMGET of the fields: the same | HMGET / ZMSCORE (own; p50; p99) |"
        )
        print("| --- | --- | --- | --- |")
        for k in KINDS:
            z, h = own[(k, "ZMSCORE")], own[(k, "HMGET")]
            zw, hw = walls[k]["ZMSCORE"], walls[k]["HMGET"]
            print(
                f"| {k} | {median(z):.0f} us; {zw['p50_ms'] * 1000:.0f} / {zw['p99_ms'] * 1000:.0f} us "
                f"| {median(h):.0f} us; {hw['p50_ms'] * 1000:.0f} / {hw['p99_ms'] * 1000:.0f} us "
                f"| {median(h) / median(z):.2f}x; {hw['p50_ms'] / zw['p50_ms']:.2f}x; "
                f"{hw['p99_ms'] / zw['p99_ms']:.2f}x |"
            )
        print("\n| memory a user | bytes | / a bare sorted set's member |")
        print("| --- | --- | --- |")
        for k, v in mem.items():
            print(f"| {k} | {v:.0f} | {v / mem['bare sorted set']:.2f}x |")
        print("\n| heartbeat, 1,000 users | Redis' own time a batch | / the floor |")
        print("| --- | --- | --- |")
        f0 = median(beat["floor (ZADD XX GT CH)"])
        for k, v in beat.items():
            print(f"| {k} | {median(v):.0f} us | {median(v) / f0:.2f}x |")
    finally:
        fixture.stop()


if __name__ == "__main__":
    main()
