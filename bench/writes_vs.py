"""The store's public writes against another commit's, on one Redis, in one run (issue 43).

``python -m bench.writes_vs --side NAME=DIR [--side NAME=DIR ...] [--rounds N] [--users N]``:
one worker process per tree (this one, as "here", and each ``DIR``, a clean export of a commit:
``git archive <commit> | tar -x -C DIR``), each importing its own tree's ``presence_app.store``
and calling its public ``Store`` methods (``touch``, ``set_status``, ``join``, ``activity``,
``heartbeat_many``: the same signatures since 89165fe) on one private Redis, each under a prefix
of its own. Commits whose scripts take other arguments, or other keys, are compared so: each
side runs its own plans and scripts on its own keys. Each side first connects ``--users`` users
(``c<i>``/``u<i>``) and touches as many HTTP-only ones (``w<i>``). Then, for each write, blocks
of ``--block`` calls alternate between the sides; a block's Redis time is ``INFO
commandstats``' of the script calls (EVALSHA, EVAL: a script's own commands are in its time)
over the block, the only other client being idle then, and its calls' wall times are the worker's (``time.perf_counter`` around each public
call, the reply parsed). Reported: Redis' own time a call (the median of the rounds) and the
wall p50 of the calls (all rounds), and the commands a call's script ran (every command but the
scripts and INFO over the block, a call).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
from typing import Any

import redis

from presence_app.testing import RedisServer

from .common import median

WORKER = r"""
import itertools, json, sys, time
sys.path.insert(0, sys.argv[1])
import redis
from presence_app.store import Store, StoreConfig
client = redis.Redis.from_url(sys.argv[2])
store = Store(client, StoreConfig(prefix=sys.argv[3], lease_ttl=21600, online_window=21600))
n = int(sys.argv[4])
for i in range(0, n, 500):
    for j in range(i, min(i + 500, n)):
        store.connect(f"c{j}", f"u{j}")
    store.touch_many([(f"w{j}", True) for j in range(i, min(i + 500, n))])
pick = itertools.count()
fresh = itertools.count()
def p():
    return next(pick) % n
WRITES = {
    "touch, a user never seen": lambda: store.touch(f"new{next(fresh)}"),
    "touch, an HTTP-only user online": lambda: store.touch(f"w{p()}"),
    "touch, a connected user": lambda: store.touch(f"u{p()}"),
    "set_status of a connected user": lambda: store.set_status(
        f"u{(i := p())}", message=f"m{next(fresh) % 7}"),
    "join of a connection": lambda: store.join(f"r{(i := p()) % 50}", f"c{i}", f"u{i}"),
    "activity of a connected user": lambda: store.activity(f"u{p()}"),
    "heartbeat_many, 100 users": lambda: store.heartbeat_many(
        [(f"c{j}", f"u{j}") for j in (p() for _ in range(100))]),
}
print(json.dumps(sorted(WRITES)), flush=True)
for line in sys.stdin:
    name, count = json.loads(line)
    fn, out = WRITES[name], []
    for _ in range(count):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    print(json.dumps(out), flush=True)
"""


SCRIPTS = ("cmdstat_evalsha", "cmdstat_eval")


def redis_usec(client: Any) -> tuple[int, int, int]:
    """(script calls, microseconds, commands) Redis has spent in script calls so far: a
    script's own commands are counted in its time (and again under their own names, left out
    of the time, counted in ``commands``: every command but the scripts' and INFO's)."""
    stats = client.info("commandstats")
    return (
        sum(int(stats.get(k, {}).get("calls", 0)) for k in SCRIPTS),
        sum(int(stats.get(k, {}).get("usec", 0)) for k in SCRIPTS),
        sum(
            int(v.get("calls", 0)) for k, v in stats.items() if k not in (*SCRIPTS, "cmdstat_info")
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.writes_vs")
    parser.add_argument("--side", action="append", default=[], help="NAME=DIR of another tree")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--users", type=int, default=10_000)
    args = parser.parse_args()
    trees = [tuple(s.split("=", 1)) for s in args.side]
    trees.append(("here", str(pathlib.Path(__file__).resolve().parent.parent)))
    server = RedisServer().start()
    workers: dict[str, subprocess.Popen] = {}
    try:
        client = redis.Redis.from_url(server.url)
        env = {**os.environ, "PYTHONPATH": ""}
        for k, (name, tree) in enumerate(trees):
            workers[name] = subprocess.Popen(
                [sys.executable, "-c", WORKER, tree, server.url, f"vs{k}", str(args.users)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd="/",
                env=env,
            )
        names = None
        for name, w in workers.items():
            got = json.loads(w.stdout.readline())
            if names is not None and got != names:
                raise RuntimeError(f"{name} offers other writes: {got}")
            names = got
        assert names is not None
        own: dict[tuple[str, str], list[float]] = {}
        wall: dict[tuple[str, str], list[float]] = {}
        per_call: dict[tuple[str, str], set[float]] = {}
        commands: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for write in names:
                for side, w in workers.items():
                    c0, u0, n0 = redis_usec(client)
                    assert w.stdin is not None and w.stdout is not None
                    w.stdin.write(json.dumps([write, args.block]) + "\n")
                    w.stdin.flush()
                    times = json.loads(w.stdout.readline())
                    c1, u1, n1 = redis_usec(client)
                    commands.setdefault((write, side), []).append((n1 - n0) / args.block)
                    own.setdefault((write, side), []).append((u1 - u0) / args.block)
                    per_call.setdefault((write, side), set()).add(round((c1 - c0) / args.block, 2))
                    wall.setdefault((write, side), []).extend(times)
        sides = list(workers)
        print(
            f"Redis' own time a call, us (median of {args.rounds} rounds of {args.block} calls);"
            " wall p50 of a call, us"
        )
        print("| write | " + " | ".join(sides) + " | " + f"{sides[-1]} / each |")
        print("| --- |" + " --- |" * (len(sides) + 1))
        for write in names:
            cells, base = [], median(own[(write, sides[-1])])
            for side in sides:
                o = median(own[(write, side)])
                p50 = statistics.median(wall[(write, side)]) * 1e6
                cells.append(f"{o:.1f} / {p50:.0f}")
            ratios = ", ".join(f"{base / median(own[(write, s)]):.2f}x" for s in sides[:-1])
            print(f"| {write} | " + " | ".join(cells) + f" | {ratios} |")
        print("\nRedis commands a write's script runs (median of the rounds):")
        for write in names:
            print(f"- {write}: " + ", ".join(
                f"{s} {median(commands[(write, s)]):.1f}" for s in sides))  # fmt: skip
        print("\nscript calls a write (each round):")
        for write in names:
            print(f"- {write}: " + ", ".join(
                f"{s} {sorted(per_call[(write, s)])}" for s in sides))  # fmt: skip
    finally:
        for w in workers.values():
            w.kill()
        server.stop()


if __name__ == "__main__":
    main()
