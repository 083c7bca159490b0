"""The store's read against another tree's, whole (script and derivation), on one site, in one
run (issue 43, sixth session).

``python -m bench.read43_ab --base DIR [--quick] [--rounds N] [--load SITE]`` builds benchmark 2's
site (bench/front_door.py; ``--load``: one saved by ``python -m bench.read43_parts --save``) and
reads it through two stores on the same Redis and keys: this tree's ``Store`` and the one of
the tree under ``DIR`` (a clean export of a commit: ``git archive <commit> | tar -x -C DIR``),
imported beside it as a package of another name (the store imports nothing of the project but
itself). First, every page of the site (64 of each kind) must read alike through both, presence
for presence (``as_dict`` and ``meta``). Then, for each kind of page, against the raw
``ZMSCORE`` of the same ids: Redis' own time a call (INFO commandstats, alternating blocks, the
median of the rounds), and the wall p50 / p99 of ``Store.get_many(200 ids)`` (derived, each
presence's state, emoji and message read, as a dot does), the sides alternating in blocks
(``bench.common.latencies``), each order of the sides for half the calls and the rounds.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
import tempfile
from typing import Any

from .common import Context, latencies, median
from .front_door import BARE, Cycle, own_times, read, site
from .read43_parts import saved_site


def base_store(folder: pathlib.Path) -> Any:
    """The ``presence_app.store`` package of the tree under ``folder``, as ``base43_app.store``."""
    links = pathlib.Path(tempfile.mkdtemp(prefix="read43ab-"))
    (links / "base43_app").symlink_to(folder.resolve() / "presence_app")
    sys.path.insert(0, str(links))
    module = importlib.import_module("base43_app.store")
    here = pathlib.Path(__file__).resolve().parent.parent / "presence_app"
    if pathlib.Path(module.__file__).resolve().parent.parent == here:
        raise RuntimeError("the base is this tree")
    return module


def same(a: Any, b: Any) -> bool:
    return a.as_dict() == b.as_dict() and a.meta == b.meta


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.read43_ab")
    parser.add_argument("--base", required=True, type=pathlib.Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=pathlib.Path, help="a site saved by read43_parts --save")
    parser.add_argument("--calls", type=int, default=0, help="wall-time calls a side and kind")
    args = parser.parse_args()
    ctx = Context(quick=args.quick)
    try:
        s = saved_site(ctx, args.load) if args.load else site(ctx)
        client, ours = s.client, s.store
        module = base_store(args.base)
        theirs = module.Store(client, module.StoreConfig(**vars(ours.config)))
        kinds = ("socket", "web", "status", "mixed")
        now = ours.server_time()  # (a present user's last seen is the clock)
        for kind in kinds:
            for ids in s.sets[kind]:
                a, b = ours.get_many(ids, now=now), theirs.get_many(ids, now=now)
                if list(a) != list(b) or not all(same(a[u], b[u]) for u in a):
                    bad = next(u for u in ids if not same(a[u], b[u]))
                    raise RuntimeError(f"a {kind} page read differently: {a[bad]} / {b[bad]}")
        ctx.log(f"both stores read the site's {len(kinds) * len(s.sets['socket'])} pages alike")
        sides = {
            "base": ("evalsha", theirs.get_many),
            "this": ("evalsha", ours.get_many),
            "raw": ("zmscore", lambda p: client.zmscore(BARE, p)),
        }
        block = ctx.size(200, 50)
        # each order of the sides for half the rounds: the side that runs first in a block is
        # not the same one throughout
        times = own_times(client, s.sets, kinds, sides, (args.rounds + 1) // 2, block)
        swapped = {k: sides[k] for k in ("this", "base", "raw")}
        for key, more in own_times(client, s.sets, kinds, swapped, args.rounds // 2, block).items():
            times[key] += more
        print(f"Redis' own time a call, us (median of {args.rounds} rounds of {block} calls)")
        print("| page | raw ZMSCORE | base | this | this / base |")
        print("| --- | --- | --- | --- | --- |")
        for kind in kinds:
            raw, b, o = (median(times[(kind, x)]) for x in ("raw", "base", "this"))
            print(
                f"| {kind} | {raw:.0f} | {b:.0f} ({b / raw:.2f}x) | {o:.0f} ({o / raw:.2f}x) "
                f"| {o / b:.2f}x |"
            )

        def timed(order: tuple[str, ...]) -> dict[str, dict]:
            fns = {}
            for kind in kinds:
                for side in order:
                    pages = Cycle(s.sets[kind])
                    if side == "raw":
                        fns[f"{kind} raw"] = lambda p=pages: client.zmscore(BARE, p())
                    else:
                        fn = {"base": theirs.get_many, "this": ours.get_many}[side]
                        fns[f"{kind} {side}"] = lambda fn=fn, p=pages: read(fn(p()))
            return latencies(fns, (args.calls or ctx.size(4000, 500)) // 2)

        # half the calls in each order of the sides (the first of a block has been seen ~20 %
        # slower at p99), each figure the mean of the two halves'
        halves = timed(("base", "this", "raw")), timed(("this", "base", "raw"))
        lat = {
            name: {q: (halves[0][name][q] + halves[1][name][q]) / 2 for q in ("p50_ms", "p99_ms")}
            for name in halves[0]
        }
        print("\nStore.get_many(200) wall p50 / p99, us (derived, a dot's fields read)")
        print("| page | raw ZMSCORE | base | this | this / base, p50 (p99) |")
        print("| --- | --- | --- | --- | --- |")
        for kind in kinds:
            raw, raw99 = (lat[f"{kind} raw"][q] * 1000 for q in ("p50_ms", "p99_ms"))
            cells = [f"{raw:.0f} / {raw99:.0f}"]
            for side in ("base", "this"):
                t, t99 = (lat[f"{kind} {side}"][q] * 1000 for q in ("p50_ms", "p99_ms"))
                cells.append(f"{t:.0f} / {t99:.0f} ({t / raw:.2f}x / {t99 / raw99:.2f}x)")
            b, o = (lat[f"{kind} {x}"] for x in ("base", "this"))
            cells.append(f"{o['p50_ms'] / b['p50_ms']:.2f}x ({o['p99_ms'] / b['p99_ms']:.2f}x)")
            print(f"| {kind} | " + " | ".join(cells) + " |")
    finally:
        ctx.redis.stop()


if __name__ == "__main__":
    main()
