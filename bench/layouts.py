"""The store's layout 2 against layout 1, side by side on one Redis (issue 13).

``python -m bench.layouts [N]`` (default 1,000,000 users) takes layout 1's store from git history
(commit 1adf6c7, the last before layout 2; ``git archive`` into a temporary package
``presence_v1``), fills both layouts with the same N connected users (each layout's own
connect.lua, as bench/dataset.py does), then times, side by side: ``get_many(200)`` in
alternating blocks, and ``sweep()`` of 10,000 expired leases in alternating rounds. Prints the
figures and the ratios layout 2 / layout 1. Not part of ``python -m bench`` (it needs the
repository's history).
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import chain
from pathlib import Path

import redis

from presence_app.store import Store, StoreConfig
from presence_app.testing import RedisServer

from . import dataset
from .common import latencies

LAYOUT_1 = "1adf6c7"


def layout_1(root: Path):
    """Layout 1's store package, extracted from git history under ``root``."""
    top = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(top), "archive", LAYOUT_1, "presence_app/store"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "presence_app").rename(root / "presence_v1")
    (root / "presence_v1" / "__init__.py").touch()
    sys.path.insert(0, str(root))
    from presence_v1 import store  # noqa: PLC0415 - only importable once extracted

    return store


def bulk_source(lua) -> str:
    """A layout's lib.lua + connect.lua body in a loop over (user, conn) pairs (dataset.py's)."""
    return "\n".join(
        [
            lua("lib"),
            "local function connect_one(ARGV)",
            lua("connect"),
            "end",
            "local HEAD = {ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]}",
            "local n = 0",
            "for i = A, #ARGV, 2 do",
            "  OUT = {}",
            "  connect_one({HEAD[1], HEAD[2], HEAD[3], HEAD[4], HEAD[5], HEAD[6], HEAD[7],"
            " ARGV[i], ARGV[i + 1], ''})",
            "  n = n + 1",
            "end",
            "return n",
        ]
    )


def fill(store, lua, pairs: list[tuple[str, str]], now: float) -> None:
    sha = store.client.script_load(bulk_source(lua))
    for i in range(0, len(pairs), 1000):
        call = store.plans.call("connect", store.keys.tag(0), now)
        args = list(chain.from_iterable((uid, cid) for cid, uid in pairs[i : i + 1000]))
        store.client.evalsha(sha, len(call.keys), *call.keys, *call.args[:7], *args)


def main(n: int) -> None:
    t0 = dataset.T0
    with tempfile.TemporaryDirectory() as tmp, RedisServer() as server:
        old = layout_1(Path(tmp))
        client = redis.Redis.from_url(server.url)
        uids = [str(i) for i in range(1, n + 1)]
        pairs = list(zip(dataset.conn_ids(n, 1), uids, strict=True))
        new_store = Store(client, StoreConfig(prefix="l2"), layout=2)
        old_store = old.Store(client, old.StoreConfig(prefix="l1"))
        sides = {
            "layout 2": (new_store, dataset.lua_source),
            "layout 1": (old_store, old.scripts._read),
        }
        for store, lua in sides.values():
            fill(store, lua, pairs, t0)
            assert store.online_count(now=t0 + 1) == n

        rng = random.Random(2)
        sets = [rng.sample(uids, 200) for _ in range(64)]

        def reads(store):
            state = {"i": 0}

            def get_many() -> None:
                state["i"] = (state["i"] + 1) % len(sets)
                assert len(store.get_many(sets[state["i"]], now=t0 + 1)) == 200

            return get_many

        lat = latencies({name: reads(store) for name, (store, _) in sides.items()}, 5000)
        for name, v in lat.items():
            print(f"get_many(200), {name}: p50 {v['p50_ms']:.3f} ms, p99 {v['p99_ms']:.3f} ms")
        a, b = lat["layout 2"], lat["layout 1"]
        print(
            f"get_many(200), layout 2 / layout 1: p50 {a['p50_ms'] / b['p50_ms']:.2f}x, "
            f"p99 {a['p99_ms'] / b['p99_ms']:.2f}x"
        )

        stale = [(cid, f"x{i}") for i, cid in enumerate(dataset.conn_ids(10_000, 99))]
        sweeps: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(5):
            for name, (store, lua) in sides.items():
                fill(store, lua, stale, t0 - 100)
                started = time.perf_counter()
                changes = store.sweep(now=t0 + 1)
                sweeps[name].append((time.perf_counter() - started) * 1000)
                assert sum(t.kind == "offline" for t in changes) == len(stale)
        for name, ms in sweeps.items():
            print(
                f"sweep() of 10,000 expired among {n:,}, {name}: median "
                f"{statistics.median(ms):.0f} ms ({', '.join(f'{x:.0f}' for x in ms)})"
            )
        ratio = statistics.median(sweeps["layout 2"]) / statistics.median(sweeps["layout 1"])
        print(f"sweep, layout 2 / layout 1: {ratio:.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
