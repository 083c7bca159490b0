"""Records first against the read it replaced, on one site, in one run (issue 43, fourth session).

``python -m bench.layout4_ab --base DIR [--quick] [--rounds N]`` builds benchmark 2's site through
the store of this tree (bench/front_door.py: 1,000,000 users, 60 % socket, 30 % HTTP-only, 10 %
with a status; records carry their copies), then runs on the same keys the read script of this
tree and the one of the store under ``DIR`` (a clean export of the commit before records first:
``git archive <commit> | tar -x -C DIR``; its ``presence_app/store/lua`` read before the copies,
passing over them: its records go into its reply as they are). First, every page of the site
(64 of each kind) must get the same reply, part for part, from both scripts: the answer is the
same. Then, for each kind of page and the raw ``ZMSCORE`` of the same ids on the site's bare set:
Redis' own time a call (INFO commandstats, alternating blocks, the median of the rounds) and the
wall p50 / p99 of the script call (redis-py's parsed reply; the derivation in Python is the
same code on the same reply for both, and comes on top).
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
from typing import Any

from .common import Context, latencies, median
from .front_door import BARE, Cycle, own_times, site


def source(lua: pathlib.Path) -> str:
    """get_many's script as scripts.load() composes it: head, read, get_many."""
    return "\n".join((lua / f"{n}.lua").read_text() for n in ("head", "read", "get_many"))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.layout4_ab")
    parser.add_argument("--base", required=True, help="the tree of the store to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    ctx = Context(quick=args.quick)
    try:
        s = site(ctx)
        client, store = s.client, s.store
        here = pathlib.Path(__file__).resolve().parent.parent / "presence_app/store/lua"
        sides_src = {
            "records first": source(here),
            "before": source(pathlib.Path(args.base) / "presence_app/store/lua"),
        }
        shas = {}
        for name, text in sides_src.items():
            shas[name] = client.script_load(text)
            assert shas[name] == hashlib.sha1(text.encode()).hexdigest()

        def script(name: str):
            sha = shas[name]

            def read(ids: list[str]) -> list[Any]:
                calls = store.plans.get_many(ids, None, False, None).calls
                return [client.evalsha(sha, len(c.keys), *c.keys, *c.args) for c in calls]

            return read

        ours, before = script("records first"), script("before")
        kinds = ("socket", "web", "status", "mixed")
        for kind in kinds:
            for ids in s.sets[kind]:
                a, b = ours(ids), before(ids)
                # the clock (first part) differs by the time between the calls
                if [r[1:] for r in a] != [r[1:] for r in b]:
                    raise RuntimeError(f"a {kind} page read differently: {ids[:5]}...")
        ctx.log(f"both scripts answer the site's {len(kinds) * len(s.sets['socket'])} pages alike")
        report(ctx, client, s.sets, kinds, {"before": before, "records first": ours}, args.rounds)
    finally:
        ctx.redis.stop()


def report(ctx: Context, client: Any, sets: Any, kinds: tuple[str, ...], reads: dict[str, Any],
           rounds: int) -> None:  # fmt: skip
    """Prints each kind's read by ``reads`` (``before`` and the other, in that order) against
    raw ZMSCORE: Redis' own time a call (alternating blocks, the median of ``rounds``), then
    the wall p50 / p99 of a call (the reply parsed by redis-py, not derived)."""
    (base, before), (name, ours) = reads.items()
    sides = {
        base: ("evalsha", before),
        name: ("evalsha", ours),
        "raw": ("zmscore", lambda p: client.zmscore(BARE, p)),
    }
    block = ctx.size(200, 50)
    times = own_times(client, sets, kinds, sides, rounds, block)
    print(f"Redis' own time a call, us (median of {rounds} rounds of {block} calls)")
    print(f"| page | raw ZMSCORE | {base} | {name} | {name} / {base} |")
    print("| --- | --- | --- | --- | --- |")
    for kind in kinds:
        raw, b, o = (median(times[(kind, x)]) for x in ("raw", base, name))
        print(
            f"| {kind} | {raw:.0f} | {b:.0f} ({b / raw:.2f}x) | {o:.0f} ({o / raw:.2f}x) "
            f"| {o / b:.2f}x |"
        )
    fns = {}
    for kind in kinds:
        for side, (_, fn) in sides.items():
            pages = Cycle(sets[kind])
            fns[f"{kind} {side}"] = lambda fn=fn, pages=pages: fn(pages())
    lat = latencies(fns, ctx.size(4000, 500))
    print("\nWall p50 / p99 of a call, us (the reply parsed by redis-py, not derived)")
    print(f"| page | raw ZMSCORE | {base} | {name} |")
    print("| --- | --- | --- | --- |")
    for kind in kinds:
        raw, raw99 = (lat[f"{kind} raw"][q] * 1000 for q in ("p50_ms", "p99_ms"))
        cells = [f"{raw:.0f} / {raw99:.0f}"]
        for side in (base, name):
            t, t99 = (lat[f"{kind} {side}"][q] * 1000 for q in ("p50_ms", "p99_ms"))
            cells.append(f"{t:.0f} / {t99:.0f} ({t / raw:.2f}x / {t99 / raw99:.2f}x)")
        print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
