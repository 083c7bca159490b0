"""Where a page's read goes, part by part, for each kind of page (issue 43, sixth session).

``python -m bench.read43_parts [--quick] [--rounds N] [--save DIR | --load DIR] [--python]``
builds benchmark 2's site (bench/front_door.py: 1,000,000 users, 60 % socket, 30 % HTTP-only,
10 % with a status; ``--save DIR`` keeps it in ``DIR`` as an RDB file and the site's lists, and
``--load DIR`` starts from them instead of building it: the site's scores last 6 hours).

**Redis' part**: get_many's script cut short at each of its parts (read.lua with ``do return 0
end`` put before the part's first line: ANCHORS), each cut and the whole script run on every
kind of page, beside the raw ``ZMSCORE`` of the same ids; Redis' own time a call (INFO
commandstats, alternating blocks of calls, the median of the rounds). A part's cost is the
difference between the cut after it and the cut before it.

**Python's part** (``--python``): ``presence.get_many(200 user objects)``'s stages on the same
pages, each timed alone on the same inputs (``bench.common.latencies``, p50): the ids read
from the objects, the plan (the script's arguments), the round trip (the reply parsed by
redis-py), the derivation, and the whole call.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import shutil
import time
from typing import Any

from .common import Context, RedisFixture, latencies, median
from .front_door import BARE, Cycle, Site, configure, objects, own_times, site

HERE = pathlib.Path(__file__).resolve().parent.parent / "presence_app/store/lua"

#: Where read.lua is cut: each part starts at the first line holding its text.
ANCHORS = [
    ("hmget", "local records = redis.call('HMGET'"),
    ("fresh", "local fresh, nf"),
    ("zmscore", "local seen = {}"),
    ("split", "local missing, web, nw = {}, {}, 0"),
    ("hidden+until", "local function scores(key, which)"),
    ("codes", "local codes, seen2, ends2, records2, webs3 = {}, {}, {}, {}, {}"),
    ("last+late", "for j, v in ipairs(scores(K_LAST, unknown))"),
    ("reply", "local out = {sc(NOW)"),
    ("registry", "if buckets then"),
]


def cut_sources(lua: pathlib.Path = HERE) -> dict[str, str]:
    """get_many's script cut before each part (name: the part the cut leaves out, the ones
    before it run), and whole ("all")."""
    head, read, get_many = ((lua / f"{n}.lua").read_text() for n in ("head", "read", "get_many"))
    lines = read.splitlines()
    out = {}
    for name, text in ANCHORS:
        at = next((i for i, line in enumerate(lines) if line.lstrip().startswith(text)), None)
        if at is None:
            raise RuntimeError(f"read.lua has no line starting with {text!r}")
        cut = "\n".join([*lines[:at], "do return 0 end", *lines[at:]])
        out[f"before {name}"] = "\n".join((head, cut, get_many))
    out["all"] = "\n".join((head, read, get_many))
    return out


def saved_site(ctx: Context, folder: pathlib.Path) -> Site:
    """The site saved by ``--save`` in ``folder``, in a Redis started from its RDB file."""
    from presence_app.core.connection import store_config
    from presence_app.store import Store

    ctx.redis = RedisFixture(extra=["--dir", str(folder), "--dbfilename", "site.rdb"])
    meta = json.loads((folder / "site.json").read_text())
    configure(ctx.redis.url, max(1, meta["n"] // 64))
    client = ctx.redis.client()
    while int(client.info("persistence")["loading"]):  # the RDB file still being read
        time.sleep(0.2)
    store = Store(client, store_config())
    out = Site(meta["n"], store, client, meta["socket"], meta["web"], meta["status"], {})
    out.sets = meta["sets"]
    ctx.log(f"the site loaded from {folder}: {client.dbsize()} keys")
    return out


def save_site(ctx: Context, s: Site, folder: pathlib.Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    s.client.save()  # (the server's own dir: CONFIG SET dir is a protected config)
    shutil.copyfile(ctx.redis.server.dir / "dump.rdb", folder / "site.rdb")
    meta = {"n": s.n, "socket": s.socket, "web": s.web, "status": s.status, "sets": s.sets}
    (folder / "site.json").write_text(json.dumps(meta))
    ctx.log(f"the site saved in {folder}")


def redis_parts(ctx: Context, s: Site, kinds: tuple[str, ...], rounds: int) -> None:
    client, store = s.client, s.store
    shas = {}
    for name, text in cut_sources().items():
        shas[name] = client.script_load(text)
        assert shas[name] == hashlib.sha1(text.encode()).hexdigest()

    def side(sha: str):
        def read(ids: list[str]) -> list[Any]:
            return [
                client.evalsha(sha, len(c.keys), *c.keys, *c.args)
                for c in store.plans.get_many(ids, None, False, None).calls
            ]

        return read

    names = list(shas)
    times: dict[tuple[str, str], list[float]] = {}
    block = ctx.size(200, 50)
    # one side at a time against raw (own_times measures sides in turn within a round)
    sides = {n: ("evalsha", side(shas[n])) for n in names}
    sides["raw"] = ("zmscore", lambda p: client.zmscore(BARE, p))
    times = own_times(client, s.sets, kinds, sides, rounds, block)
    print(f"\nRedis' own time a call, us (median of {rounds} rounds of {block} calls)")
    print("| cut | " + " | ".join(kinds) + " |")
    print("| --- |" + " --- |" * len(kinds))
    med = {k: median(v) for k, v in times.items()}
    for name in ["raw", *names]:
        print(f"| {name} | " + " | ".join(f"{med[(k, name)]:.0f}" for k in kinds) + " |")
    print("\nEach part: the cut after it less the cut before it, us")
    print("| part | " + " | ".join(kinds) + " |")
    print("| --- |" + " --- |" * len(kinds))
    first = names[0]
    print("| call + head + decode | " + " | ".join(f"{med[(k, first)]:.0f}" for k in kinds) + " |")
    for (part, _), before, after in zip(ANCHORS, names, names[1:], strict=False):
        print(
            f"| {part} | "
            + " | ".join(f"{med[(k, after)] - med[(k, before)]:.0f}" for k in kinds)
            + " |"
        )


def python_parts(ctx: Context, s: Site, kinds: tuple[str, ...]) -> None:
    from presence_app import presence
    from presence_app.core import rules

    store = s.store
    fns: dict[str, Any] = {}
    for kind in kinds:
        users = [objects(ids) for ids in s.sets[kind]]
        ids = [rules.user_ids(u) for u in users]
        plans = [store.plans.get_many(i, None, False, None) for i in ids]
        replies = [store._send(p.calls) for p in plans]
        u, i, pr = Cycle(users), Cycle(ids), Cycle(list(zip(plans, replies, strict=True)))
        fns[f"{kind} ids"] = lambda u=u: rules.user_ids(u())
        fns[f"{kind} plan"] = lambda i=i: store.plans.get_many(i(), None, False, None)
        fns[f"{kind} round trip"] = lambda pr=pr: store._send(pr()[0].calls)

        def derive(pr=pr) -> Any:
            plan, reply = pr()
            return plan.finish(reply)

        fns[f"{kind} derive"] = derive
        fns[f"{kind} presence.get_many"] = lambda u=u: presence.get_many(u())
        fns[f"{kind} raw"] = lambda i=i: s.client.zmscore(BARE, i())
    lat = latencies(fns, ctx.size(4000, 500))
    stages = ("ids", "plan", "round trip", "derive", "presence.get_many", "raw")
    print("\nPython's part: each stage alone, p50 us (p99)")
    print("| stage | " + " | ".join(kinds) + " |")
    print("| --- |" + " --- |" * len(kinds))
    for st in stages:
        cells = []
        for kind in kinds:
            r = lat[f"{kind} {st}"]
            cells.append(f"{r['p50_ms'] * 1000:.0f} ({r['p99_ms'] * 1000:.0f})")
        print(f"| {st} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read43_parts")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--save", type=pathlib.Path)
    parser.add_argument("--load", type=pathlib.Path)
    parser.add_argument("--python", action="store_true", help="Python's part too")
    parser.add_argument("--no-redis", action="store_true", help="not Redis' part")
    args = parser.parse_args()
    ctx = Context(quick=args.quick)
    try:
        s = saved_site(ctx, args.load) if args.load else site(ctx)
        if args.save:
            save_site(ctx, s, args.save)
        kinds = ("socket", "web", "status", "mixed")
        if not args.no_redis:
            redis_parts(ctx, s, kinds, args.rounds)
        if args.python:
            python_parts(ctx, s, kinds)
    finally:
        ctx.redis.stop()


if __name__ == "__main__":
    main()
