"""Records first's writes against the writes before it, on one Redis, in one run (issue 43).

``python -m bench.layout4_writes_ab --base DIR [--rounds N]``: two stores of this tree on one
private Redis, each under a prefix of its own, one running this tree's scripts and the other
the scripts of the tree under ``DIR`` (a clean export of the commit before records first); the
calls (keys and arguments) are this tree's plans for both, which records first did not change.
For each write, blocks of calls alternate between the two sides; Redis' own time a call is
``INFO commandstats``' (evalsha) over the block, the median of the rounds. 10,000 connected
users and 10,000 HTTP-only users a side, written through the same calls first.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
from collections.abc import Callable
from typing import Any

import redis

from presence_app.store import Store, StoreConfig
from presence_app.store.scripts import NAMES, READERS, READS
from presence_app.testing import RedisServer

from .common import median
from .front_door import commandstat


def sources(lua: pathlib.Path) -> dict[str, str]:
    """Each script as scripts.load() composes it."""
    read = lambda n: (lua / f"{n}.lua").read_text()  # noqa: E731
    out = {}
    for name in NAMES:
        parts = ["head"] if name in READS else ["head", "lib"]
        if name in READERS:
            parts.append("read")
        out[name] = "\n".join([*(read(p) for p in parts), read(name)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.layout4_writes_ab")
    parser.add_argument("--base", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--users", type=int, default=10_000)
    args = parser.parse_args()
    here = pathlib.Path(__file__).resolve().parent.parent / "presence_app/store/lua"
    server = RedisServer().start()
    try:
        client = redis.Redis.from_url(server.url)
        sides: dict[str, tuple[Store, dict[str, str]]] = {}
        for name, lua in (("before", pathlib.Path(args.base) / "presence_app/store/lua"),
                          ("records first", here)):  # fmt: skip
            store = Store(client, StoreConfig(prefix=f"ab{len(sides)}", lease_ttl=21600,
                                              online_window=21600))  # fmt: skip
            shas = {n: client.script_load(src) for n, src in sources(lua).items()}
            sides[name] = (store, shas)

        def run(side: str, plan: Any) -> None:
            _, shas = sides[side]
            for c in plan.calls:
                if c.script:
                    client.evalsha(shas[c.script], len(c.keys), *c.keys, *c.args)
                else:
                    client.execute_command(*c.args)

        n = args.users
        for side, (store, _) in sides.items():
            p = store.planned
            for i in range(0, n, 500):
                for j in range(i, i + 500):
                    run(side, p.connect(f"c{j}", f"u{j}"))
                    run(side, p.touch_many([(f"w{j}", True)]))
        counters = {s: itertools.count() for s in sides}
        fresh = {s: itertools.count() for s in sides}

        def writes(side: str) -> dict[str, Callable[[], Any]]:
            store = sides[side][0]
            p = store.planned

            def pick() -> int:
                return next(counters[side]) % n

            return {
                "touch, a user never seen": lambda: run(
                    side, p.touch_many([(f"new{next(fresh[side])}", True)])
                ),
                "touch, an HTTP-only user online": lambda: run(
                    side, p.touch_many([(f"w{pick()}", True)])
                ),
                "set_status of a connected user": lambda: run(
                    side, p.set_status(f"u{(i := pick())}", message=f"m{i % 7}")
                ),
                "join of a connection": lambda: run(
                    side, p.join(f"r{(i := pick()) % 50}", f"c{i}", f"u{i}")
                ),
                "activity of a connected user": lambda: run(side, p.activity(f"u{pick()}")),
                "heartbeat_many, 100 users": lambda: run(
                    side,
                    p.heartbeat_many([(f"c{j}", f"u{j}") for j in (pick() for _ in range(100))]),
                ),
            }

        fns = {s: writes(s) for s in sides}
        names = list(fns["before"])
        block = 500
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name in names:
                for side in sides:
                    c0, u0 = commandstat(client, "evalsha")
                    for _ in range(block):
                        fns[side][name]()
                    c1, u1 = commandstat(client, "evalsha")
                    times.setdefault((name, side), []).append((u1 - u0) / (c1 - c0))
        print(f"Redis' own time a call, us (median of {args.rounds} rounds of {block} calls)")
        print("| write | before | records first | records first / before |")
        print("| --- | --- | --- | --- |")
        for name in names:
            b, o = (median(times[(name, s)]) for s in ("before", "records first"))
            print(f"| {name} | {b:.1f} | {o:.1f} | {o / b:.2f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
