"""8. Peer: the same heartbeat load through django-channels-presence's model approach (a database
row updated per heartbeat) on SQLite and PostgreSQL, against ours.

The load: ``connections`` sockets, each heartbeating; as many heartbeats as each side can take in
``seconds`` from one Python process. The peer runs the installed package's own
``Presence.objects.touch`` (bench/peer_worker.py, a subprocess with its own Django settings) on a
SQLite file database and on a private PostgreSQL cluster, both with their defaults, twice: as
shipped (its query filters on ``channel_name``, which no index leads with) and with an index on
``channel_name`` added (the peer at its best). Ours: the same connections renewed through
``Store.heartbeat_many`` in batches of 1,000 (the coalescer's path) and, for the per-heartbeat
comparison, one ``Store.heartbeat`` call per heartbeat.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .common import ROOT, Context, Row, benchmark, median, rates, run_worker
from .dataset import T0, conn_ids, connect_all

BATCH = 1000


def peer_worker(config: dict, timeout: float = 300) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return run_worker("bench.peer_worker", [json.dumps(config)], env, timeout)


def ours_rates(ctx: Context, n: int, seconds: float) -> dict[str, float]:
    from presence_app.store import Store, StoreConfig

    client = ctx.redis.client()
    store = Store(client, StoreConfig(prefix="bpeer"))
    uids = [str(i) for i in range(1, n + 1)]
    pairs = list(zip(conn_ids(n, seed=8), uids, strict=True))
    if "peer:filled" not in ctx.cache:
        connect_all(store, pairs, T0)
        ctx.cache["peer:filled"] = True
    batches = [pairs[i : i + BATCH] for i in range(0, n, BATCH)]
    clock = [T0 + 1.0]
    pos = {"batch": 0, "one": 0}

    def batched() -> int:
        b = batches[pos["batch"]]
        pos["batch"] = (pos["batch"] + 1) % len(batches)
        clock[0] += 0.001
        if store.heartbeat_many(b, now=clock[0]):
            raise RuntimeError("missing leases")
        return len(b)

    def single() -> int:
        cid, uid = pairs[pos["one"]]
        pos["one"] = (pos["one"] + 1) % n
        clock[0] += 0.000001
        if not store.heartbeat(cid, uid, now=clock[0]):
            raise RuntimeError("missing lease")
        return 1

    got = rates({"batched": batched, "single": single}, 1, seconds)
    return {name: r["median"] for name, r in got.items()}


@benchmark(
    "peer",
    "8. peer: django-channels-presence (a row per heartbeat) on SQLite and PostgreSQL vs ours",
)
def run(ctx: Context) -> list[Row]:
    n = ctx.size(10_000, 2_000)
    seconds = ctx.size(3.0, 1.0)
    rooms = 100
    results: dict[str, dict] = {}
    ours_runs: list[dict[str, float]] = [ours_rates(ctx, n, seconds)]

    def measure(engine: str, index: bool, db: dict) -> dict:
        """Runs the peer on ``db`` (as shipped, or with the index) into ``results``."""
        label = f"{engine}, {'indexed' if index else 'as shipped'}"
        ctx.log(f"peer on {label}: {n:,} presences, {seconds}s")
        config = {"database": db, "connections": n, "rooms": rooms, "seconds": seconds}
        results[label] = peer_worker({**config, "index": index})
        return results[label]

    with tempfile.TemporaryDirectory(prefix="presence-peer-") as tmp:
        for index in (False, True):
            sqlite = {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(Path(tmp) / f"peer-{index}.sqlite3"),
            }
            measure("SQLite", index, sqlite)

    pg_error = None
    try:
        from .pg import PostgresServer

        with PostgresServer() as pg:
            import psycopg

            for index in (False, True):
                name = f"peer_{'indexed' if index else 'shipped'}"
                with psycopg.connect(
                    host="127.0.0.1",
                    port=pg.port,
                    user="postgres",
                    dbname="postgres",
                    autocommit=True,
                ) as conn:
                    conn.execute(f"CREATE DATABASE {name}")
                measure("PostgreSQL", index, {**pg.settings, "NAME": name})["server"] = pg.version()
    except Exception as exc:  # noqa: BLE001 - report SQLite alone and say why
        pg_error = f"{type(exc).__name__}: {exc}"
        ctx.log(f"PostgreSQL unavailable: {pg_error}")

    ours_runs.append(ours_rates(ctx, n, seconds))
    ours_batched = median(r["batched"] for r in ours_runs)
    ours_single = median(r["single"] for r in ours_runs)
    rows = []
    for label, peer in results.items():
        rows.append(
            Row(
                bench="8 peer",
                metric=f"heartbeats/s vs channels-presence on {label} ({n:,} sockets)",
                ours=ours_batched,
                unit="/s",
                baseline=peer["rate"],
                baseline_label="touch()",
                details={
                    "connections": n,
                    "peer": peer,
                    "ours_batched_runs": [r["batched"] for r in ours_runs],
                    "ours_single_runs": [r["single"] for r in ours_runs],
                    "ours_single_median": ours_single,
                    "ratio_single_call": ours_single / peer["rate"],
                },
            )
        )
    if pg_error:
        rows.append(
            Row(
                bench="8 peer",
                metric="PostgreSQL: not measured",
                ours=ours_batched,
                unit="/s",
                details={"error": pg_error},
            )
        )
    return rows
