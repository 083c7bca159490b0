"""Issue 43, ninth session: a read with no script, probed on each server.

``python -m bench.plain43_proto --load DIR [--rounds N] [--calls N]`` starts from benchmark 2's
site saved by ``python -m bench.read43_parts --save DIR`` (1,000,000 users, 60 % socket, 30 %
HTTP-only, 10 % with a status), on the server ``PRESENCE_REDIS_SERVER`` names (Debian's
``redis-server`` by default), and reads each kind of page four ways, side by side in one run:

- ``raw``: ``ZMSCORE`` of the page's ids on the bare sorted set (benchmark 2's baseline);
- ``script``: the store's read, ``Store.get_many`` (its script, reply and derivation);
- ``plain5``: the lookups the store's script makes, as plain commands in one ``MULTI``
  (``TIME``, ``ZMSCORE`` of ``seen``, ``HMGET`` of the records, ``ZMSCORE`` of ``until``,
  ``hidden`` and ``last``): every fact a derivation needs, with no Lua;
- ``plain2``: only ``TIME``, ``seen`` and the records in one ``MULTI`` (the floor of any read of
  this layout without a script);
- ``field``: one ``HMGET`` of a hash holding a field a user (the eighth session's probe,
  ``bench/field43_proto.py``: a socket user's registry part, an HTTP-only user's web score, a
  status user's record), built beside the site's keys from them.

So that every lookup meets a real key, ``until``, ``hidden`` and ``last`` are given 1,000
entries each of users on no page (a site's graces, invisible and offline users) before the
runs; the store's script then pays for them as it would on such a site.

Redis' own time a call (INFO commandstats over a block of one side's calls: ``EVALSHA``, or
``MULTI`` and ``EXEC``, whose times hold the commands they run; the median of the rounds) and the wall p50 / p99 (``bench.common.latencies``: the
reply as redis-py parses it; only ``script`` derives presences) are printed against raw's. The
store is not changed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

from .common import Context, latencies, median, server_of, walls_us
from .front_door import BARE, Cycle, commandstat
from .read43_parts import saved_site

KINDS = ("socket", "web", "status", "mixed")


#: The commands whose time is a side's own: a script's and an EXEC's include the commands they
#: run (INFO commandstats counts those twice, in their own lines too).
COMMANDS = {
    "raw": ("zmscore",),
    "script": ("evalsha",),
    "plain5": ("multi", "exec"),
    "plain2": ("multi", "exec"),
    "field": ("hmget",),
}


def busy_usec(client: Any, commands: tuple[str, ...]) -> int:
    """Microseconds Redis has spent in ``commands`` so far."""
    return sum(commandstat(client, c)[1] for c in commands)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.plain43_proto")
    parser.add_argument("--load", required=True, type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--block", type=int, default=150)
    args = parser.parse_args()
    ctx = Context(quick=False)
    try:
        s = saved_site(ctx, args.load)
        r, store = s.client, s.store
        keys = store.keys
        if keys.shards != 1:
            raise RuntimeError("the site is saved with one shard")
        tag = keys.tag(0)
        seen, recs = keys.seen(tag), keys.records(tag)
        until, hidden, last = keys.until(tag), keys.hidden(tag), keys.last(tag)
        server = server_of(r)

        # a site's graces, invisible and offline users: 1,000 each, on no page
        at = float(r.zscore(BARE, s.socket[0]) or 0)
        r.zadd(until, {f"g{i}": at + 30 for i in range(1000)})
        r.zadd(hidden, {f"h{i}": at for i in range(1000)})
        r.zadd(last, {f"o{i}": at - 3600 for i in range(1000)})

        # the one-field hash, from the site's own data
        u = f"{tag}:probe:u"
        kinds = dict.fromkeys(s.socket, "socket")
        kinds.update(dict.fromkeys(s.web, "web"))
        kinds.update(dict.fromkeys(s.status, "status"))
        ids = list(kinds)
        for i in range(0, len(ids), 10_000):
            chunk = ids[i : i + 10_000]
            scores = r.zmscore(seen, chunk)
            records = r.hmget(recs, chunk)
            fields = {}
            for j, (uid, sc, rec) in enumerate(zip(chunk, scores, records, strict=True)):
                k = kinds[uid]
                if k == "web":
                    fields[uid] = f"{sc:.6f}"
                elif k == "status" and rec:
                    fields[uid] = rec
                else:
                    fields[uid] = f"p{j % 8}\x1f{uid[-12:]:>12}\x1f{sc:.6f}"
            r.hset(u, mapping=fields)

        def plain5(pg: list[str]) -> Any:
            p = r.pipeline(transaction=True)
            p.time()
            p.zmscore(seen, pg)
            p.hmget(recs, pg)
            p.zmscore(until, pg)
            p.zmscore(hidden, pg)
            p.zmscore(last, pg)
            return p.execute()

        def plain2(pg: list[str]) -> Any:
            p = r.pipeline(transaction=True)
            p.time()
            p.zmscore(seen, pg)
            p.hmget(recs, pg)
            return p.execute()

        sides = {
            "raw": lambda pg: r.zmscore(BARE, pg),
            "script": store.get_many,
            "plain5": plain5,
            "plain2": plain2,
            "field": lambda pg: r.hmget(u, pg),
        }
        for kind in KINDS:  # the lookups meet the site's users (in seen or the records)
            pg = s.sets[kind][0]
            got = plain5(pg)
            if sum(x is not None for x in got[1]) + sum(x is not None for x in got[2]) == 0:
                raise RuntimeError(f"the {kind} page finds nobody")

        own: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for kind in KINDS:
                pages = Cycle(s.sets[kind])
                for side, fn in sides.items():
                    u0 = busy_usec(r, COMMANDS[side])
                    for _ in range(args.block):
                        fn(pages())
                    u1 = busy_usec(r, COMMANDS[side])
                    own.setdefault((kind, side), []).append((u1 - u0) / args.block)
        walls: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            cycles = {side: Cycle(s.sets[kind]) for side in sides}
            fns = {side: (lambda fn=fn, p=cycles[side]: fn(p())) for side, fn in sides.items()}
            walls[kind] = latencies(fns, args.calls)

        out = {
            "server": server,
            "own_us": {f"{k} {side}": median(v) for (k, side), v in own.items()},
            "wall_us": walls_us(walls),
        }
        print(json.dumps(out, indent=1))
        print(f"\n{server}: Redis' own time a call / raw; wall p50 / raw; wall p99 / raw\n")
        names = [side for side in sides if side != "raw"]
        print("| page of 200 | raw: own; p50 / p99 | " + " | ".join(names) + " |")
        print("| --- | --- | " + " | ".join("---" for _ in names) + " |")
        for kind in KINDS:
            ro, rw = median(own[(kind, "raw")]), walls[kind]["raw"]
            cells = []
            for side in names:
                o, w = median(own[(kind, side)]), walls[kind][side]
                cells.append(
                    f"{o / ro:.2f}x; {w['p50_ms'] / rw['p50_ms']:.2f}x; "
                    f"{w['p99_ms'] / rw['p99_ms']:.2f}x"
                )
            print(
                f"| {kind} | {ro:.0f} us; {rw['p50_ms'] * 1000:.0f} / {rw['p99_ms'] * 1000:.0f} us | "
                + " | ".join(cells)
                + " |"
            )
    finally:
        ctx.redis.stop()


if __name__ == "__main__":
    main()
