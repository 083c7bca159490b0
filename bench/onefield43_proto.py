"""Issue 43, ninth session: one field a user, with no copy, probed — reads, memory and a touch.

``python -m bench.onefield43_proto [--users N] [--rounds N] [--calls N]`` builds, on a private
server (``PRESENCE_REDIS_SERVER``, Debian's ``redis-server`` by default), a synthetic site of
benchmark 2's kinds (60 % socket users, 30 % HTTP-only, 10 % with a status) in the shape of a
layout whose page is read by one ``HMGET`` and no script, the one shape measured within raw
``ZMSCORE`` on every server (``bench/plain43_proto.py``), with the two costs the eighth session
found in it (``bench/field43_proto.py``) designed out:

- **no copy of the score, so the heartbeat is today's**: a socket user's field names their
  process (``p<process> \\x1f <conn> \\x1f <last activity>``), and they are present while that
  process's lease runs (a page's read asks ``procs`` for the live processes:
  ``ZRANGEBYSCORE procs <now> +inf``, a few names). The heartbeat writes ``seen`` alone, as now.
  ``--compact``: the field in 12 characters (``<process number> \\x1f <the connection's number in
  its process, 3 base-36 digits> \\x1f <last activity, seconds in base 36>``), which Redis keeps
  in a 16-byte allocation, where the 24 above take 32.
- **no sorted-set member for an HTTP-only user**: their field holds their last request
  (``w<ms in base 36>``) and a set of the window's minute (``web:<minute>``) lists them for the
  listings and the sweep; a socket or status user keeps their ``seen`` member (the listings'
  and the heartbeat's index).
- a status user's field is their record with their live connections' processes in front
  (``r<p>,<p> \\x1f <record>``).

It measures, side by side with benchmark 2's baseline (raw ``ZMSCORE`` of the same ids on a
bare sorted set of every id):

- **reads**: one ``MULTI`` (``TIME``, ``HMGET`` of the page's fields, the live processes), the
  reply parsed by redis-py and made into ``Presence`` objects by a derivation written for this
  shape (``derive`` below: a dot's fields; an offline user would need their last seen in the
  field too, not built), wall p50 / p99 for each kind of page;
- **memory**: the bytes a user of each kind costs (``used_memory`` before and after), against a
  bare sorted set's member; today's are benchmark 14's (socket 1.44x, HTTP-only 1.01x);
- **online()'s first page of HTTP-only users** (50, most recent first): a sorted set of them (as
  ``seen``'s negative part is today) against the minute sets, each read whole from the newest
  on and its users ordered by their fields (wall p50);
- **a touch of an HTTP-only user already listed**: Redis' own time of the shape's script (the
  field rewritten, the user moved to the minute's set when it changed) against the store's own
  ``touch`` (``Store.touch``, on users written by ``Store.touch_many`` under a prefix of their
  own on the same server).

Not measured: counts and the sweep over minute sets, connects and disconnects, and a stale
process's users (the sweep's).
The store is not changed.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from presence_app.store import Store, StoreConfig
from presence_app.store.types import SEP, Presence

from .common import RedisFixture, latencies, median, server_of, walls_us
from .dataset import used_memory
from .front_door import Cycle, commandstat

RECORD = "\x1f1795000000.5\x1f\x1f\x1f{msg}\x1f{emoji}\x1fweb\x1f\x1f\x1f\x1f\x1f"
MESSAGES = ["In a meeting", "Deep work", "Lunch", "Commuting", "On call"]
EMOJI = [":calendar:", ":headphones:", ":fork_and_knife:", ":bus:", ":pager:"]
KINDS = ("socket", "web", "status", "mixed")
WINDOW = 60.0
PROCESSES = 8
FIELD_SEP = SEP.encode()  # (a record's, and the shape's fields')

TOUCH = """
local t = redis.call('TIME')
local ms = t[1] * 1000 + math.floor(t[2] / 1000)
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and string.byte(old) ~= 119 then return 0 end  -- (a connected user: another path)
redis.call('HSET', KEYS[1], ARGV[1], 'w' .. ARGV[2])
local minute = math.floor(ms / 60000)
if old then
  local was = math.floor(tonumber(string.sub(old, 2), 36) / 60000)
  if was == minute then return 1 end
  redis.call('SREM', KEYS[2] .. was, ARGV[1])
end
redis.call('SADD', KEYS[2] .. minute, ARGV[1])
return 1
"""


def b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def deriver(window: float):
    new = object.__new__

    def derive(ids: list[str], reply: list[Any]) -> dict[str, Presence]:
        t, fields, live = reply
        now = int(t[0]) + int(t[1]) / 1e6
        floor_ms = (now - window) * 1000
        live = set(live)
        out: dict[str, Presence] = {}
        for uid, f in zip(ids, fields, strict=True):
            out[uid] = p = new(Presence)
            d = p.__dict__
            d["user_id"] = uid
            if f is None:  # offline (their last seen would be in the field: not built)
                continue
            kind = f[0]
            # p, or a compact field's digit: a socket user, present while their process is
            if kind == 112 or kind < 58:
                if f[: f.index(FIELD_SEP)] in live:
                    d["state"], d["last_seen"] = "online", now
                continue
            if kind == 119:  # w: an HTTP-only user, present within the window
                ms = int(f[1:], 36)
                if ms >= floor_ms:
                    d["state"], d["last_seen"], d["last_active"] = "online", now, ms / 1000
                continue
            # r: a record holder, present while a process of theirs is (the record's fields
            # as bytes: only the texts a presence shows are decoded)
            procs, st, la, _, _, msg, emo, dev, mx, meta, _, idle, _ = f[1:].split(FIELD_SEP, 12)
            if not (procs in live or any(pr in live for pr in procs.split(b","))):
                continue
            d["last_seen"] = now
            d["state"] = (
                st.decode()
                if st in (b"dnd", b"invisible")
                else "idle"
                if idle == b"1"
                else "online"
            )
            if la:
                d["last_active"] = float(la)
            if not (mx and float(mx) < now):
                d["message"], d["emoji"] = msg.decode(), emo.decode()
            d["device"] = dev.decode()
        return out

    return derive


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.onefield43_proto")
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument(
        "--compact",
        action="store_true",
        help="a socket user's field in 12 characters: the process's number, the connection's "
        "number in its process (3 base-36 digits) and the last activity to the second",
    )
    args = parser.parse_args()
    rng = random.Random(43)
    fixture = RedisFixture().start()
    try:
        r = fixture.client()
        server = server_of(r)
        now = float(r.time()[0])
        n = args.users
        kinds = ["socket"] * (n * 6 // 10) + ["web"] * (n * 3 // 10)
        kinds += ["status"] * (n - len(kinds))
        rng.shuffle(kinds)
        ids = [str(10_000_000 + i) for i in range(n)]
        by_kind: dict[str, list[str]] = {"socket": [], "web": [], "status": []}
        for uid, kind in zip(ids, kinds, strict=True):
            by_kind[kind].append(uid)
        # (a compact field's process is a number: its first character tells the kind too)
        procs = [f"{'' if args.compact else 'p'}{i}" for i in range(PROCESSES)]
        r.zadd("procs", dict.fromkeys(procs, now + 90))

        mem: dict[str, float] = {}
        base = used_memory(r)
        for s in range(0, n, 10_000):
            r.zadd("bare", {u: now - rng.random() * 30 for u in ids[s : s + 10_000]})
        mem["a bare sorted set's member"] = (used_memory(r) - base) / n
        for kind, members in by_kind.items():
            before = used_memory(r)
            for s in range(0, len(members), 10_000):
                chunk = members[s : s + 10_000]
                scores = r.zmscore("bare", chunk)
                fields, index, minutes = {}, {}, {}
                for uid, sc in zip(chunk, scores, strict=True):
                    ms = int(sc * 1000)
                    if kind == "web":
                        fields[uid] = "w" + b36(ms)
                        minutes.setdefault(f"web:{ms // 60000}", []).append(uid)
                        continue
                    index[uid] = sc
                    pr = rng.choice(procs)
                    if kind == "socket":
                        if args.compact:  # 12 characters: a 16-byte allocation
                            conn = b36(rng.randrange(36**3)).rjust(3, "0")
                            fields[uid] = f"{pr}\x1f{conn}\x1f{b36(ms // 1000)}"
                        else:
                            conn = f"{rng.getrandbits(72):018x}"[:12]
                            fields[uid] = f"{pr}\x1f{conn}\x1f{b36(ms)}"
                    else:
                        rec = RECORD.format(msg=rng.choice(MESSAGES), emoji=rng.choice(EMOJI))
                        fields[uid] = f"r{pr}\x1f{rec}"
                r.hset("u", mapping=fields)
                for key, listed in minutes.items():
                    r.sadd(key, *listed)
                if index:
                    r.zadd("seen", index)
            mem[kind] = (used_memory(r) - before) / len(members)

        pages = {k: [rng.sample(v, 200) for _ in range(64)] for k, v in by_kind.items()}
        pages["mixed"] = [rng.sample(ids, 200) for _ in range(64)]
        derive = deriver(WINDOW)

        def shape(pg: list[str]) -> dict[str, Presence]:
            p = r.pipeline(transaction=True)
            p.time()
            p.hmget("u", pg)
            p.zrangebyscore("procs", now, "+inf")
            return derive(pg, p.execute())

        for kind in KINDS:  # the derivation finds every user of the site online
            found = shape(pages[kind][0])
            if not all(p.state == "online" for p in found.values()):
                raise RuntimeError(f"the {kind} page is not all online")
        walls = {}
        for kind in KINDS:
            it = {s: Cycle(pages[kind]) for s in ("raw", "shape")}
            walls[kind] = latencies(
                {
                    "raw": lambda i=it["raw"]: r.zmscore("bare", i()),
                    "shape": lambda i=it["shape"]: shape(i()),
                },
                args.calls,
            )

        # online()'s first page of HTTP-only users, most recent first: a sorted set of them (as
        # `seen`'s negative part is today) against the shape's minute sets, each set read whole
        # from the newest on, its users' fields read and ordered, until a page is found
        web_users = by_kind["web"]
        for s in range(0, len(web_users), 10_000):
            chunk = web_users[s : s + 10_000]
            r.zadd("webz", dict(zip(chunk, r.zmscore("bare", chunk), strict=True)))
        minute_keys = sorted(
            (k.decode() for k in r.scan_iter("web:*", count=1000)),
            key=lambda k: int(k.split(":")[1]),
            reverse=True,
        )

        def from_minutes(page: int = 50) -> list[str]:
            found: list[tuple[int, str]] = []
            for key in minute_keys:
                users = r.smembers(key)
                if users:
                    users = list(users)
                    found += zip((int(f[1:], 36) for f in r.hmget("u", users)), users, strict=True)
                if len(found) >= page:
                    break
            return [u.decode() for _, u in sorted(found, reverse=True)[:page]]

        top = r.zrevrange("webz", 0, 49)
        if len(from_minutes()) != 50 or not top:
            raise RuntimeError("no page of HTTP-only users")
        listing = latencies(
            {
                "sorted set": lambda: r.zrevrange("webz", 0, 49, withscores=True),
                "minute sets": from_minutes,
            },
            40,
            warmup=2,
            block=5,
            series=2,
        )
        newest = r.scard(minute_keys[0])

        # a touch of an HTTP-only user already listed: the store's, and the shape's
        store = Store(r, StoreConfig(prefix="today", registry_buckets=64))
        web = by_kind["web"][:20_000]
        for s in range(0, len(web), 1000):
            store.touch_many([(u, True) for u in web[s : s + 1000]])
        touch = r.script_load(TOUCH)
        touches: dict[str, list[float]] = {"store": [], "shape": []}
        for _ in range(args.rounds):
            for side in ("store", "shape"):
                sample = rng.sample(web, 500)
                command = "evalsha"
                c0, u0 = commandstat(r, command)
                for uid in sample:
                    if side == "store":
                        store.touch(uid)
                    else:
                        ms = int(time.time() * 1000)
                        r.evalsha(touch, 2, "u", "web:", uid, b36(ms))
                c1, u1 = commandstat(r, command)
                touches[side].append((u1 - u0) / (c1 - c0))

        out = {
            "server": server,
            "memory_bytes_a_user": mem,
            "reads_wall_us": walls_us(walls),
            "touch_own_us": {k: median(v) for k, v in touches.items()},
            "listing_50_http_only_us": walls_us({"page": listing}),
            "listing_newest_minutes_users": newest,
        }
        print(json.dumps(out, indent=1))
        print(f"\n{server}\n")
        print(
            "| page of 200 | raw `ZMSCORE` p50 / p99 | the shape, with its derivation | / raw: p50; p99 |"
        )
        print("| --- | --- | --- | --- |")
        for k in KINDS:
            w, s = walls[k]["raw"], walls[k]["shape"]
            print(
                f"| {k} | {w['p50_ms'] * 1000:.0f} / {w['p99_ms'] * 1000:.0f} us "
                f"| {s['p50_ms'] * 1000:.0f} / {s['p99_ms'] * 1000:.0f} us "
                f"| {s['p50_ms'] / w['p50_ms']:.2f}x; {s['p99_ms'] / w['p99_ms']:.2f}x |"
            )
        bare = mem["a bare sorted set's member"]
        print("\n| a user | bytes | / a bare member |")
        print("| --- | --- | --- |")
        for k, v in mem.items():
            print(f"| {k} | {v:.0f} | {v / bare:.2f}x |")
        st, sh = median(touches["store"]), median(touches["shape"])
        print(
            f"\ntouch of an HTTP-only user, Redis' own time: store {st:.1f} us, shape {sh:.1f} us"
            f" ({sh / st:.2f}x)"
        )
        z, m = listing["sorted set"], listing["minute sets"]
        print(
            f"online()'s first 50 HTTP-only users, p50: a sorted set {z['p50_ms'] * 1000:.0f} us,"
            f" the minute sets {m['p50_ms'] * 1000:.0f} us ({m['p50_ms'] / z['p50_ms']:.0f}x;"
            f" {newest:,} users in the newest minute)"
        )
    finally:
        fixture.stop()


if __name__ == "__main__":
    main()
