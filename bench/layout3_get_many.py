"""Designs for layout 3's ``get_many(200)`` against raw ``ZMSCORE`` of the same ids, side by side
(alternating blocks, ``bench.common.latencies``) on N users connected through
``Store(..., layout=3).connect``, plain (one WebSocket, no status), so every design reads the
same thing: users present by their ``seen`` score, no record.

``python -m bench.layout3_get_many [N] [CALLS] [DESIGN,...]`` (default 100,000 users, 3,000 calls
of each, every design).

- ``raw``: ``ZMSCORE seen`` of the 200 ids (the target's baseline);
- ``built``: ``Store.get_many`` as built (lua3/get_many.lua), a dot's fields read.

Step 4's designs, with the records as keys (``u:<user>``, as the store kept them then; these read
absent keys, as a plain user has no record), a tuple per user instead of a ``Presence``:

- ``pipe6``: no script: one pipeline of every read the derivation needs (``ZMSCORE`` of
  ``seen``, ``until``, ``hidden``, ``web``, ``last``; ``MGET`` of the records);
- ``pipe3`` / ``pipe3tx``: the fewest reads a present plain user needs (``ZMSCORE`` of ``seen``
  and ``until``, ``MGET``; HTTP-only, offline and invisible users would need a second round
  trip); without and with ``MULTI``/``EXEC`` (atomic, as a script is);
- ``pipe3f`` / ``pipe3ftx``: ``pipe3`` with each key made without escaping its id;
- ``pipe2``: ``ZMSCORE seen`` + ``MGET`` only (not a design: it misses a grace's end);
- ``zms2``: ``ZMSCORE`` of ``seen`` and ``until`` (not a design: no record), the floor of any
  read that does not fetch the records;
- ``thin``: one short script (the clock, both ``ZMSCORE``, the ``MGET``) with the ids and keys as
  its arguments (400 to pack);
- ``thinj``: the same with the ids joined in one argument (Lua splits them and makes the keys).

Step 5's, with the records as fields of one hash a shard (1 user in 100 has one here):

- ``hmget`` / ``hmgettx``: ``ZMSCORE`` of ``seen`` and ``until`` and ``HMGET`` of the records,
  without and with ``MULTI``/``EXEC``;
- ``smis``: ``SMISMEMBER`` of a set of the users who have a record, instead of fetching them;
- ``thinh``: ``thinj`` with ``HMGET``: no key a user to make (what the store now does).

Not part of ``python -m bench``: figures in docs/benchmarks.md, "Store layout 3, step 4" and
"step 5".
"""

from __future__ import annotations

import os
import random
import sys

from presence_app.store import Store, StoreConfig
from presence_app.store.keys import KeySpace
from presence_app.testing import RedisServer

from .common import latencies
from .dataset import T0, conn_ids

SPAN = 90.0


def main(n: int, calls: int, only: list[str] | None = None) -> None:
    with RedisServer() as srv:
        client = srv.client()
        store = Store(client, StoreConfig(prefix="b3", registry_buckets=max(1, n // 64)), layout=3)
        uids = [str(i) for i in range(1, n + 1)]
        cids = conn_ids(n, seed=1)
        plans = store.planned
        for i in range(0, n, 1000):
            store.gather(
                *(plans.connect(cids[j], uids[j], now=T0) for j in range(i, min(i + 1000, n)))
            )
        tag = store.keys.tag(0)
        rng = random.Random(2)
        sets = [rng.sample(uids, 200) for _ in range(64)]
        now = T0 + 1
        seen, until, hidden = KeySpace.seen(tag), KeySpace.until(tag), KeySpace.hidden(tag)
        web, last = f"{tag}:web", f"{tag}:last"
        at: dict[str, int] = {}

        def ids_for(name: str) -> list[str]:
            at[name] = (at.get(name, 0) + 1) % len(sets)
            return sets[at[name]]

        def raw() -> None:
            client.zmscore(seen, ids_for("raw"))

        def built() -> None:
            for p in store.get_many(ids_for("built"), now=now).values():
                p.state, p.emoji, p.message  # noqa: B018

        def tuples(ids, scores, ends, records) -> None:
            out = {}
            for uid, s, e, r in zip(ids, scores, ends, records, strict=True):
                if r is None and s is not None:
                    out[uid] = ("online" if (e or s + SPAN) >= now else "offline", "", "")
                else:
                    out[uid] = ("other", "", "")  # a record: derived as layout 3 does
            for state, emoji, message in out.values():
                state, emoji, message  # noqa: B018

        def pipe6() -> None:
            ids = ids_for("pipe6")
            p = client.pipeline(transaction=False)
            for key in (seen, until, hidden, web, last):
                p.zmscore(key, ids)
            p.mget([KeySpace.user(tag, u) for u in ids])
            s, e, _, _, _, records = p.execute()
            tuples(ids, s, e, records)

        def pipe3(tx: bool = False, name: str = "pipe3") -> None:
            ids = ids_for(name)
            p = client.pipeline(transaction=tx)
            p.zmscore(seen, ids)
            p.zmscore(until, ids)
            p.mget([KeySpace.user(tag, u) for u in ids])
            tuples(ids, *p.execute())

        base = f"{tag}:u:"

        def pipe3f(tx: bool = False, name: str = "pipe3f") -> None:
            # pipe3 with the keys made without escaping each id (ids that need none)
            ids = ids_for(name)
            p = client.pipeline(transaction=tx)
            p.zmscore(seen, ids)
            p.zmscore(until, ids)
            p.mget([base + u for u in ids])
            tuples(ids, *p.execute())

        thin_sha = client.script_load(
            "local t = redis.call('TIME') return {t[1], t[2],"
            " redis.call('ZMSCORE', KEYS[1], unpack(ARGV)),"
            " redis.call('ZMSCORE', KEYS[2], unpack(ARGV)),"
            " redis.call('MGET', unpack(KEYS, 3))}"
        )

        def thin() -> None:
            # one short script (no loop): the clock, both ZMSCOREs and the MGET, scores parsed
            # in Python
            ids = ids_for("thin")
            _, _, s, e, records = client.evalsha(
                thin_sha, len(ids) + 2, seen, until, *[base + u for u in ids], *ids
            )
            tuples(
                ids,
                [float(x) if x is not None else None for x in s],
                [float(x) if x is not None else None for x in e],
                records,
            )

        thinj_sha = client.script_load(
            "local ids, keys = {}, {} local base = ARGV[2]"
            " for uid in string.gmatch(ARGV[1], '[^\\n]+') do"
            " ids[#ids + 1] = uid keys[#keys + 1] = base .. uid end"
            " local t = redis.call('TIME')"
            " local ends = redis.call('EXISTS', KEYS[2]) == 1"
            " and redis.call('ZMSCORE', KEYS[2], unpack(ids)) or {}"
            " return {t[1], t[2], redis.call('ZMSCORE', KEYS[1], unpack(ids)), ends,"
            " redis.call('MGET', unpack(keys))}"
        )

        def thinj() -> None:
            # one short script taking the ids joined in one argument (one to pack, not 400)
            ids = ids_for("thinj")
            _, _, s, e, records = client.evalsha(thinj_sha, 2, seen, until, "\n".join(ids), base)
            tuples(
                ids,
                [float(x) if x is not None else None for x in s],
                [float(x) if x is not None else None for x in e] or [None] * len(ids),
                records,
            )

        thinh_sha = client.script_load(
            "local ids = {}"
            " for uid in string.gmatch(ARGV[1], '[^\\n]+') do ids[#ids + 1] = uid end"
            " local t = redis.call('TIME')"
            " local ends = redis.call('EXISTS', KEYS[2]) == 1"
            " and redis.call('ZMSCORE', KEYS[2], unpack(ids)) or {}"
            " return {t[1], t[2], redis.call('ZMSCORE', KEYS[1], unpack(ids)), ends,"
            " redis.call('HMGET', KEYS[3], unpack(ids))}"
        )

        def thinh() -> None:
            # thinj with the records as fields of one hash a shard: no key to build
            ids = ids_for("thinh")
            _, _, s, e, records = client.evalsha(thinh_sha, 3, seen, until, recs, "\n".join(ids))
            tuples(
                ids,
                [float(x) if x is not None else None for x in s],
                [float(x) if x is not None else None for x in e] or [None] * len(ids),
                records,
            )

        def pipe2() -> None:
            ids = ids_for("pipe2")
            p = client.pipeline(transaction=False)
            p.zmscore(seen, ids)
            p.mget([KeySpace.user(tag, u) for u in ids])
            s, records = p.execute()
            tuples(ids, s, [None] * len(ids), records)

        def zms2() -> None:
            ids = ids_for("zms2")
            p = client.pipeline(transaction=False)
            p.zmscore(seen, ids)
            p.zmscore(until, ids)
            p.execute()

        # a record of 1 user in 100 kept as a field of one hash a shard (instead of a key each),
        # and a set of the users that have one: what a read of no record key would look up
        recs, recset = f"{tag}:recs", f"{tag}:recset"
        record = b"x" * 100
        for i in range(0, n, 100 * 1000):
            chunk = uids[i : i + 100 * 1000 : 100]
            client.hset(recs, mapping=dict.fromkeys(chunk, record))
            client.sadd(recset, *chunk)

        def hmget(tx: bool = False, name: str = "hmget") -> None:
            ids = ids_for(name)
            p = client.pipeline(transaction=tx)
            p.zmscore(seen, ids)
            p.zmscore(until, ids)
            p.hmget(recs, ids)
            tuples(ids, *p.execute())

        def smis() -> None:
            ids = ids_for("smis")
            p = client.pipeline(transaction=False)
            p.zmscore(seen, ids)
            p.zmscore(until, ids)
            p.smismember(recset, ids)
            s, e, has = p.execute()
            tuples(ids, s, e, [b"" if h else None for h in has])

        fns = {
            "raw": raw,
            "built": built,
            "pipe6": pipe6,
            "pipe3": pipe3,
            "pipe3tx": lambda: pipe3(True, "pipe3tx"),
            "pipe3f": pipe3f,
            "pipe3ftx": lambda: pipe3f(True, "pipe3ftx"),
            "thin": thin,
            "thinj": thinj,
            "thinh": thinh,
            "pipe2": pipe2,
            "zms2": zms2,
            "hmget": hmget,
            "hmgettx": lambda: hmget(True, "hmgettx"),
            "smis": smis,
        }
        if only:
            fns = {name: fns[name] for name in ["raw", *only]}
        lat = latencies(fns, calls)
        print(f"{n:,} users, {calls:,} calls each, load average {os.getloadavg()[:3]}")
        print("| design | p50 | p99 | p50 / raw | p99 / raw |")
        print("| --- | --- | --- | --- | --- |")
        r = lat["raw"]
        for name, v in lat.items():
            print(
                f"| {name} | {v['p50_ms'] * 1000:.0f} us | {v['p99_ms'] * 1000:.0f} us "
                f"| {v['p50_ms'] / r['p50_ms']:.2f}x | {v['p99_ms'] / r['p99_ms']:.2f}x |"
            )


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 100_000,
        int(sys.argv[2]) if len(sys.argv) > 2 else 3000,
        sys.argv[3].split(",") if len(sys.argv) > 3 else None,
    )
