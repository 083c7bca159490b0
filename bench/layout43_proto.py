"""Issue 43's layout prototype: can a read of another layout reach 2x raw ZMSCORE for every kind?

``python -m bench.layout43_proto [--quick] [--rounds N] [--check]`` builds benchmark 2's site
through the store that ships (bench/front_door.py: 1,000,000 users, 60 % socket, 30 % HTTP-only,
10 % with a status), then, beside the store's own keys and from them, the keys of the designs
not built (the store is not changed):

- ``one index``: every listed visible user in one sorted set, an HTTP-only user's web score
  negated (the sign tells the kind), so that a page is one ZMSCORE whatever its kinds, and 4e9
  added to the magnitude of the score of a user who has a record (the record flag), so that the
  records are read (HMGET) only for the users that have one;
- the flagged ``seen`` alone (the flag without the one index: ``web`` read for the ids it lacks);
- ``records first``: each record holder's record with their score in front of it, read before
  the one index, which is asked only about the ids with no record.

Prototype scripts read a page from them the way get_many.lua does for the kinds of the site (the
clock, the ids' JSON, the K_UNTIL and hidden checks, a code a user, the records and the web
scores as one string each); each answers all of the site's pages as the store's script does
(checked first; ``--check`` stops there). Each is timed against the store's script
(``Store.get_many``) and the raw ZMSCORE of the same ids on benchmark 2's bare set: Redis' own
time a call (INFO commandstats, alternating blocks of 200 calls, the median of the rounds) and
the wall p50 / p99 of the call (the reply parsed by redis-py, not derived: the store's
derivation, timed apart, comes on top). Then the writes that keep these layouts: a heartbeat
batch's write as today, keeping the flag, renewing records first's copies; and records first's
copies renewed by the sweep instead. docs/benchmarks.md (issue 43, third session) has the runs.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import timeit
from typing import Any

from .common import Context, latencies, median
from .front_door import BARE, Cycle, commandstat, own_times, site

RS = "\x1e"  # separates a reply's records (get_many.lua)
FLAG = 4e9  # added to the magnitude of a record holder's score (the prototype's encoding)

PROTO = """
local NOW = tonumber(redis.call('TIME')[1])
local SPAN, WINDOW = tonumber(ARGV[1]), tonumber(ARGV[2])
local U, RECS, HIDDEN, UNTIL = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local FLAG = 4e9
local ids = cjson.decode(ARGV[3])
local resp3 = ARGV[4] == '3'
if resp3 then redis.setresp(3) end
local s = redis.call('ZMSCORE', U, unpack(ids))
if resp3 then redis.setresp(2) end
local mode = ARGV[5]
local codes, recids, webs, missing, at = {}, {}, {}, {}, {}
for i = 1, #ids do
  local raw = s[i]
  if not raw then
    codes[i] = '0'; missing[#missing + 1] = ids[i]; at[#missing] = i
  else
    local x = resp3 and raw.double or tonumber(raw)
    local web = x < 0
    if web then x = -x end
    local rec = x >= FLAG
    if rec then x = x - FLAG end
    if web then
      if not rec and x + WINDOW >= NOW then
        codes[i] = '3'
        webs[#webs + 1] = resp3 and string.format('%.17g', x) or string.sub(raw, 2)
      else
        codes[i] = '0'; recids[#recids + 1] = ids[i]
      end
    elseif x + SPAN >= NOW then
      if rec then codes[i] = '2'; recids[#recids + 1] = ids[i] else codes[i] = '1' end
    else
      codes[i] = '0'; recids[#recids + 1] = ids[i]
    end
  end
end
if mode == 'two' and #missing > 0 then  -- web users in an index of their own
  local w = redis.call('ZMSCORE', KEYS[5], unpack(missing))
  for j = 1, #missing do
    if w[j] and tonumber(w[j]) + WINDOW >= NOW then codes[at[j]] = '3'; webs[#webs + 1] = w[j] end
  end
end
if mode == 'all' then recids = ids end  -- no record flag: every id's record asked
if redis.call('EXISTS', UNTIL) == 1 then return redis.error_reply('K_UNTIL not empty') end
if #missing > 0 and redis.call('EXISTS', HIDDEN) == 1 then
  redis.call('ZMSCORE', HIDDEN, unpack(missing))
end
local recs = {}
if #recids > 0 then recs = redis.call('HMGET', RECS, unpack(recids)) end
for i = 1, #recs do recs[i] = recs[i] or '' end
return {tostring(NOW), table.concat(codes), table.concat(recs, '\\30'), table.concat(webs, ' ')}
"""

# Records first: the records of the page's ids (a record holder's score kept in its record,
# "score \\31 record"), then the one index for the ids with none. A status user costs one
# lookup; the others pay the records' misses.
RECS_FIRST = """
local NOW = tonumber(redis.call('TIME')[1])
local SPAN, WINDOW = tonumber(ARGV[1]), tonumber(ARGV[2])
local U, RECS, UNTIL = KEYS[1], KEYS[2], KEYS[3]
local ids = cjson.decode(ARGV[3])
local r = redis.call('HMGET', RECS, unpack(ids))
local codes, recs, rest, at, webs = {}, {}, {}, {}, {}
local match = string.match
for i = 1, #ids do
  local v = r[i]
  if v then
    codes[i] = tonumber(match(v, '^[^\\31]*')) + SPAN >= NOW and '2' or '0'
    recs[#recs + 1] = v
  else
    rest[#rest + 1] = ids[i]; at[#rest] = i
  end
end
if #rest > 0 then
  local s = redis.call('ZMSCORE', U, unpack(rest))
  for j = 1, #rest do
    local raw, code = s[j], '0'
    if raw then
      local x = tonumber(raw)
      if x < 0 then
        if -x + WINDOW >= NOW then code = '3'; webs[#webs + 1] = string.sub(raw, 2) end
      elseif x + SPAN >= NOW then
        code = '1'
      end
    end
    codes[at[j]] = code
  end
end
if redis.call('EXISTS', UNTIL) == 1 then return redis.error_reply('K_UNTIL not empty') end
return {tostring(NOW), table.concat(codes), table.concat(recs, '\\30'), table.concat(webs, ' ')}
"""

# A heartbeat batch's write (heartbeat.lua's ZADD XX GT CH of one clock for all); the same where
# the score carries the record flag (each user's flag read first); and records first's (each
# record holder's copy of the score renewed in its record: the records of the batch read, the
# holders' written).
BEAT = """
local now = tonumber(redis.call('TIME')[1])
local FLAG = 4e9
local users = {}
if ARGV[1] == 'flag' then
  redis.setresp(3)
  local s = redis.call('ZMSCORE', KEYS[1], unpack(ARGV, 2))
  redis.setresp(2)
  for i = 2, #ARGV do
    local x = s[i - 1]
    users[2 * i - 3] = string.format('%.17g', (x and x.double >= FLAG) and now + FLAG or now)
    users[2 * i - 2] = ARGV[i]
  end
else
  local t = string.format('%.17g', now)
  for i = 2, #ARGV do users[2 * i - 3] = t; users[2 * i - 2] = ARGV[i] end
  if ARGV[1] == 'copy' then  -- records first: each record holder's copy of the score renewed
    local r = redis.call('HMGET', KEYS[2], unpack(ARGV, 2))
    local renewed = {}
    for i = 2, #ARGV do
      local v = r[i - 1]
      if v then
        renewed[#renewed + 1] = ARGV[i]
        renewed[#renewed + 1] = t .. string.sub(v, string.find(v, '\\31', 1, true), -1)
      end
    end
    if #renewed > 0 then redis.call('HSET', KEYS[2], unpack(renewed)) end
  end
end
return redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(users))
"""

# Records first, its copies kept by the sweep instead of the heartbeat: the record holders by
# their copy's score (KEYS[3]); a round renews at most ARGV[2] of the copies older than half a
# lease (ARGV[1]) from the index, in the records and in that set.
RENEW = """
local now = tonumber(redis.call('TIME')[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[1]) / 2,
  'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
local s = redis.call('ZMSCORE', KEYS[1], unpack(due))
local r = redis.call('HMGET', KEYS[2], unpack(due))
local recs, copies = {}, {}
for i = 1, #due do
  if s[i] and r[i] then
    recs[#recs + 1] = due[i]
    recs[#recs + 1] = s[i] .. string.sub(r[i], string.find(r[i], '\\31', 1, true), -1)
    copies[#copies + 1] = s[i]; copies[#copies + 1] = due[i]
  end
end
if #recs > 0 then
  redis.call('HSET', KEYS[2], unpack(recs))
  redis.call('ZADD', KEYS[3], unpack(copies))
end
return #due
"""


def renewals(ctx: Context, s: Any, index: str, records: str, rounds: int) -> None:
    """Records first's copies renewed by the sweep: Redis' own time a holder (rounds of 1,000),
    every holder's copy made due first (its score less 2/3 of a lease)."""
    client, store = s.client, s.store
    span = float(store.config.lease_ttl)
    copies = f"{store.keys.tag(0)}:proto:copies"
    client.delete(copies)
    holders = list(client.hkeys(records))
    for i in range(0, len(holders), 10_000):
        chunk = holders[i : i + 10_000]
        scores = client.zmscore(f"{store.keys.tag(0)}:seen", chunk)
        client.zadd(
            copies, {u: sc - span * 2 / 3 for u, sc in zip(chunk, scores, strict=True) if sc}
        )
    sha = client.script_load(RENEW)
    per = []
    calls = min(10, len(holders) // (1000 * rounds))
    for _ in range(rounds):
        c0, u0 = commandstat(client, "evalsha")
        done = sum(client.evalsha(sha, 3, index, records, copies, span, 1000) for _ in range(calls))
        c1, u1 = commandstat(client, "evalsha")
        per.append((u1 - u0) / done)
    print(
        f"\nRecords first's copies renewed by the sweep (Redis' own time a holder, median of "
        f"{rounds} rounds of {calls} x 1,000): {median(per):.2f} us"
    )


def build(client: Any, store: Any, key: str, web_too: bool = True) -> dict[str, int]:
    """An index beside the store's keys: seen as it is, +FLAG for record holders; web negated
    (``web_too``) or left out (it stays in the store's K_WEB)."""
    tag = store.keys.tag(0)
    seen, web, recs = f"{tag}:seen", f"{tag}:web", f"{tag}:recs"
    client.delete(key)
    holders = set()
    cursor = 0
    while True:
        cursor, fields = client.hscan(recs, cursor, count=10_000)
        holders.update(fields)
        if cursor == 0:
            break
    counts = {"seen": 0, "web": 0, "records": len(holders)}
    for source, sign in ((seen, 1.0), (web, -1.0))[: 2 if web_too else 1]:
        start = 0
        while True:
            chunk = client.zrange(source, start, start + 9_999, withscores=True)
            if not chunk:
                break
            client.zadd(key, {m: sign * (s + (FLAG if m in holders else 0.0)) for m, s in chunk})
            counts["seen" if sign > 0 else "web"] += len(chunk)
            start += 10_000
    return counts


def build_records(client: Any, store: Any, key: str) -> None:
    """The records with their holder's score first ("score \\31 record"), for RECS_FIRST."""
    tag = store.keys.tag(0)
    client.delete(key)
    cursor = 0
    while True:
        cursor, fields = client.hscan(f"{tag}:recs", cursor, count=10_000)
        uids = list(fields)
        pipe = client.pipeline(transaction=False)
        for uid in uids:
            pipe.zscore(f"{tag}:seen", uid)
        scores = pipe.execute()
        values = {
            uid: f"{score!r}\x1f".encode() + fields[uid]
            for uid, score in zip(uids, scores, strict=True)
            if score is not None
        }
        if values:
            client.hset(key, mapping=values)
        if cursor == 0:
            break


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.layout43_proto")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="compare the replies, time nothing")
    args = parser.parse_args()
    ctx = Context(quick=args.quick)
    try:
        s = site(ctx)
        client, store = s.client, s.store
        tag = store.keys.tag(0)
        one, flagged = f"{tag}:proto:one", f"{tag}:proto:seen"
        t0 = time.time()
        counts = build(client, store, one)
        build(client, store, flagged, web_too=False)
        recs2 = f"{tag}:proto:recs"
        build_records(client, store, recs2)
        ctx.log(f"the prototype's indexes built in {time.time() - t0:.0f} s: {counts}")
        sha = client.script_load(PROTO)
        span, window = str(store.config.lease_ttl), str(store.config.online_window)
        rest = [f"{tag}:recs", f"{tag}:hidden", f"{tag}:until", f"{tag}:web"]

        def proto(ids: list[str], resp: str, mode: str = "one") -> Any:
            keys = [flagged if mode == "two" else one, *rest]
            return client.evalsha(sha, len(keys), *keys, span, window, json.dumps(ids), resp, mode)

        sha2 = client.script_load(RECS_FIRST)

        def records_first(ids: list[str]) -> Any:
            keys = [one, recs2, f"{tag}:until"]
            return client.evalsha(sha2, len(keys), *keys, span, window, json.dumps(ids))

        # every prototype answers every page of the site as the store's script does: the same
        # codes, the same records, the same web scores
        from presence_app.store.sync import single

        def text(x: Any) -> str:
            return x.decode() if isinstance(x, bytes) else x

        for kind in ("socket", "web", "status", "mixed"):
            for ids in s.sets[kind]:
                want = single(client, store.plans.get_many(ids, None, False, None).calls[0])
                codes, recs = text(want[1]), text(want[2])
                webs = [float(w) for w in text(want[3]).split()]
                got = {
                    f"{m} RESP{r}": proto(ids, r, m)
                    for r, m in (("2", "one"), ("3", "one"), ("3", "all"), ("3", "two"))
                }
                got["records first"] = records_first(ids)
                for name, reply in got.items():
                    mine = text(reply[2])
                    if name == "records first":  # each record after its holder's score
                        mine = (
                            RS.join(r.split("\x1f", 1)[1] for r in mine.split(RS)) if mine else ""
                        )
                    if (
                        text(reply[1]) != codes
                        or (name != "all RESP3" and mine != recs)
                        or [float(w) for w in text(reply[3]).split()] != webs
                    ):
                        raise RuntimeError(f"{name} does not answer a {kind} page as the store")
        ctx.log("every prototype answers the site's 256 pages as the store's script does")
        if args.check:
            return
        kinds = ("socket", "web", "status", "mixed")
        sides = {
            "store": ("evalsha", lambda p: store.get_many(p)),
            "one+flag RESP2": ("evalsha", lambda p: proto(p, "2")),
            "one+flag RESP3": ("evalsha", lambda p: proto(p, "3")),
            "one, all records": ("evalsha", lambda p: proto(p, "3", "all")),
            "flag, web apart": ("evalsha", lambda p: proto(p, "3", "two")),
            "records first": ("evalsha", records_first),
            "raw": ("zmscore", lambda p: client.zmscore(BARE, p)),
        }
        block = ctx.size(200, 50)
        times = own_times(client, s.sets, kinds, sides, args.rounds, block)
        print(f"Redis' own time a call, us (median of {args.rounds} rounds of {block} calls)")
        names = [n for n in sides if n != "raw"]
        print("| page | raw ZMSCORE | " + " | ".join(names) + " |")
        print("| --- " * (len(names) + 2) + "|")
        for kind in kinds:
            raw = median(times[(kind, "raw")])
            cells = [f"{raw:.0f}"]
            for side in names:
                t = median(times[(kind, side)])
                cells.append(f"{t:.0f} ({t / raw:.2f}x)")
            print(f"| {kind} | " + " | ".join(cells) + " |")
        fns = {}
        for kind in kinds:
            for side, (_, fn) in sides.items():
                pages = Cycle(s.sets[kind])
                fns[f"{kind} {side}"] = lambda fn=fn, pages=pages: fn(pages())
        lat = latencies(fns, ctx.size(4000, 500))
        print("\nWall p50 / p99 of a call, us (the reply parsed, not derived; the store's is)")
        print("| page | raw ZMSCORE | " + " | ".join(names) + " |")
        print("| --- " * (len(names) + 2) + "|")
        for kind in kinds:
            raw, raw99 = (lat[f"{kind} raw"][q] * 1000 for q in ("p50_ms", "p99_ms"))
            cells = [f"{raw:.0f} / {raw99:.0f}"]
            for side in names:
                t, t99 = (lat[f"{kind} {side}"][q] * 1000 for q in ("p50_ms", "p99_ms"))
                cells.append(f"{t:.0f} / {t99:.0f} ({t / raw:.2f}x / {t99 / raw99:.2f}x)")
            print(f"| {kind} | " + " | ".join(cells) + " |")
        derivations(s, kinds)
        beats(ctx, s, flagged, recs2, args.rounds)
        renewals(ctx, s, f"{tag}:seen", recs2, args.rounds)
    finally:
        ctx.redis.stop()


def derivations(s: Any, kinds: tuple[str, ...]) -> None:
    """The store's derivation of a reply of each kind (CPU, best of 7 x 200, canned replies of
    the store's script): what a design whose script sends the same codes and parts pays on top
    of its call (the front door's own ~30 us aside)."""
    from presence_app.store.sync import single

    cells = []
    for kind in kinds:
        plan = s.store.plans.get_many(s.sets[kind][0], None, False, None)
        reply = single(s.client, plan.calls[0])
        best = min(
            timeit.repeat(lambda plan=plan, reply=reply: plan.finish([reply]), number=200, repeat=7)
        )
        cells.append(f"{kind} {best / 200 * 1e6:.0f} us")
    print("\nThe store's derivation of a page (CPU): " + ", ".join(cells))


def beats(ctx: Context, s: Any, key: str, records: str, rounds: int) -> None:
    """A heartbeat batch of 1,000 connected users of the site on the flagged index: Redis' own
    time of its write, as today, with the record flag to keep, and with records first's copies
    to renew."""
    client = s.client
    rng = random.Random(7)
    connected = s.socket + s.status
    batches = Cycle([rng.sample(connected, 1000) for _ in range(16)])
    sha = client.script_load(BEAT)
    block = ctx.size(100, 20)
    times: dict[str, list[float]] = {"plain": [], "flag": [], "copy": []}
    for _ in range(rounds):
        for mode in times:
            c0, u0 = commandstat(client, "evalsha")
            for _ in range(block):
                client.evalsha(sha, 2, key, records, mode, *batches())
            c1, u1 = commandstat(client, "evalsha")
            times[mode].append((u1 - u0) / (c1 - c0))
    plain, flag, copy = (median(times[m]) for m in ("plain", "flag", "copy"))
    print(
        f"\nA heartbeat batch of 1,000 (Redis' own time a call, median of {rounds} rounds of "
        f"{block}): one clock for all {plain:.0f} us, the flag kept {flag:.0f} us "
        f"({flag / plain:.2f}x), records first's copies renewed {copy:.0f} us ({copy / plain:.2f}x)"
    )


if __name__ == "__main__":
    main()
