"""3. ``online(limit=100)``, ``online_count()``, ``room_members()`` at 10 k and 1 M users against
the raw command each one would at least need, with the growth from 10 k to 1 M users (users
connected through ``Store.connect``).

Latencies are client-side round trips (``time.perf_counter_ns`` around the call: planning,
redis-py, loopback, Redis, parsing), ours and raw measured in alternating blocks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark, latencies
from .dataset import T0, Population, population

ROOM = "lobby"
ROOM_SIZE = 100


def raw_keys(pop: Population) -> tuple[str, str]:
    tag = pop.store.keys.tag(0)
    return KeySpace.seen(tag), KeySpace.room(tag, ROOM)


def span(pop: Population) -> float:
    """How long a sign of life keeps a user present: the online index' band is [now - span, +inf)."""
    return max(pop.store.config.lease_ttl, pop.store.config.online_window)


@benchmark("listings", "3. online(limit=100), online_count(), room_members() at 10 k and 1 M users")
def run_listings(ctx: Context) -> list[Row]:
    sizes = [10_000, ctx.size(1_000_000, 100_000)]
    samples = ctx.size(5000, 800)
    now = T0 + 1
    fns: dict[str, Callable[[], Any]] = {}
    for n in sizes:
        pop = population(ctx, n, "l10k" if n == 10_000 else "l1m")
        store, client = pop.store, pop.client
        online_key, room_key = raw_keys(pop)
        if client.zcard(room_key) < ROOM_SIZE:
            members = random.Random(3).sample(range(n), ROOM_SIZE)
            for i in members:
                store.join(ROOM, pop.cids[i], pop.uids[i], now=T0)
        if (
            len(store.room_members(ROOM, now=now)) != ROOM_SIZE
            or len(store.online(limit=100, now=now)) != 100
        ):
            raise RuntimeError("unexpected listing sizes")
        fns.update(
            {
                f"online {n}": lambda s=store: s.online(limit=100, now=now),
                f"online raw {n}": lambda c=client, k=online_key, f=now - span(pop): (  # noqa: B008
                    c.zrevrangebyscore(k, "+inf", f, start=0, num=100, withscores=True)
                ),
                f"online_count {n}": lambda s=store: s.online_count(now=now),
                f"online_count raw {n}": lambda c=client, k=online_key, f=now - span(pop): c.zcount(  # noqa: B008
                    k, f, "+inf"
                ),
                f"room_members {n}": lambda s=store: s.room_members(ROOM, now=now),
                f"room_members raw {n}": lambda c=client, k=room_key: c.zrange(
                    k, 0, -1, withscores=True
                ),
            }
        )
    # Both sizes side by side, so that the growth compares like with like.
    ctx.log(f"listings at {sizes[0]:,} and {sizes[1]:,} users: {samples} calls each")
    lat = latencies(fns, samples)
    per_size = {
        n: {name.rsplit(" ", 1)[0]: v for name, v in lat.items() if name.endswith(f" {n}")}
        for n in sizes
    }

    small, big = sizes
    bound = math.log(big) / math.log(small)  # O(log N): how much a log N step may grow
    rows: list[Row] = []
    labels = {
        "online": ("online(limit=100)", "ZREVRANGEBYSCORE"),
        "online_count": ("online_count()", "ZCOUNT"),
        "room_members": (f"room_members() ({ROOM_SIZE} members)", "ZRANGE"),
    }
    for op, (metric, raw_label) in labels.items():
        for n in sizes:
            o, r = per_size[n][op], per_size[n][f"{op} raw"]
            checks = [Check("p99 <= 1 ms", o["p99_ms"], "<=", 1.0)]
            details = {"population": n, "ours": o, "raw": r}
            if n == big:
                growth = o["p50_ms"] / per_size[small][op]["p50_ms"]
                checks.append(
                    Check(
                        f"p50 growth {small // 1000}k->{big // 1000}k <= {bound:.2f}x (log N)",
                        growth,
                        "<=",
                        bound,
                    )
                )
                details["growth_p50"] = growth
                details["growth_p99"] = o["p99_ms"] / per_size[small][op]["p99_ms"]
                details["raw_growth_p50"] = r["p50_ms"] / per_size[small][f"{op} raw"]["p50_ms"]
            rows.append(
                Row(
                    bench="3 listings",
                    metric=f"{metric} p99, {n:,} users",
                    ours=o["p99_ms"],
                    unit="ms",
                    baseline=r["p99_ms"],
                    baseline_label=raw_label,
                    checks=checks,
                    details=details,
                )
            )
    return rows
