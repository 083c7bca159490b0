"""6. WebSockets end to end: one ASGI process (uvicorn, then daphne) holding 1 k, 5 k and 10 k
authenticated sockets that heartbeat, against the same server running a bare Channels consumer.

Each server is a subprocess on a free loopback port (tests/servers.py: the project's ASGI
application, settings bench/ws_settings.py, a SQLite file with one user and session per
socket, the run's Redis); the load is bench/ws_client.py, another process (its docstring says
what it measures). Ours is ``project.asgi:application``, the presence consumer as shipped; the
baseline is bench/ws_bare.py, the same stack with a consumer that only acks heartbeats and
announces joins with one ``group_send``: what Channels costs before any presence state. Both are
measured on the same server kind, one after the other, with the same client and sizes, and with
project/asgi.py's collector (presence_app.realtime.collector: start-up frozen, large thresholds,
a full collection after churn); a third run on uvicorn uses CPython's collector as it comes
(bench/ws_default_gc.py), and a fourth the frozen start-up with CPython's thresholds
(bench/ws_cpython_gc.py, the demo's between the soak's first fix and the churn collector), to
show the full collections' stalls each avoids.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.servers import AsgiServer, Database

from .common import Check, Context, Row, benchmark, percentile, worker_results

#: (server kind, side) -> the ASGI application. "default-gc" is ours with CPython's collector as
#: it comes, "cpython-gc" with the frozen start-up and CPython's thresholds: what the tuning
#: avoids (on uvicorn only: each costs a run).
RUNS = {
    ("uvicorn", "ours"): "project.asgi:application",
    ("uvicorn", "bare"): "bench.ws_bare:application",
    ("uvicorn", "default-gc"): "bench.ws_default_gc:application",
    ("uvicorn", "cpython-gc"): "bench.ws_cpython_gc:application",
    ("daphne", "ours"): "project.asgi:application",
    ("daphne", "bare"): "bench.ws_bare:application",
}
SERVERS = ("uvicorn", "daphne")
ROOM_SIZE = 100
P99_TARGET_MS = 50.0


def client_run(
    ctx: Context,
    server: AsgiServer,
    cookies: list[str],
    joiner: str,
    sizes: list[int],
    folder: Path,
) -> list[dict[str, Any]]:
    config = {
        "ws_url": server.ws_url,
        "origin": server.origin,
        "server_pid": server.pid,
        "cookies": cookies,
        "joiner_cookie": joiner,
        "sizes": sizes,
        "room_size": ROOM_SIZE,
        "ack_seconds": ctx.size(8, 3),
        "cycles": ctx.size(40, 10),
        # Every socket beats 3x as often as presence.js does (HEARTBEAT_INTERVAL is 30 s).
        "beat_every": 10.0,
        "deliver_timeout": 5.0,
        "settle": ctx.size(3, 1),
    }
    path = folder / f"client-{server.name}.json"
    path.write_text(json.dumps(config))
    results = worker_results(
        "bench.ws_client",
        [str(path)],
        timeout=1800,
        context=lambda: f"load client against {server.name}; server log:\n{server.log()}",
    )
    if server.tracebacks():
        raise RuntimeError(f"{server.name} printed tracebacks:\n{server.log()}")
    return results


def p99(result: dict[str, Any]) -> float:
    samples = result["delivery"]["latency_ms"]
    return percentile(samples, 99) if samples else float("inf")


@benchmark("sockets", "6. WebSockets end to end")
def run(ctx: Context) -> list[Row]:
    sizes = [ctx.size(1000, 200), ctx.size(5000, 500), ctx.size(10_000, 1000)]
    folder = Path(tempfile.mkdtemp(prefix="bench-sockets-"))
    ctx.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    db = Database(
        folder / "db.sqlite3", settings="bench.ws_settings", env={"REDIS_URL": ctx.redis.url}
    ).migrate()
    names = [f"u{i}" for i in range(sizes[-1])]
    ctx.log(f"sockets: {len(names) + 1} users and sessions")
    users = db.users([*names, "joiner"])
    cookies = [users[n].cookie for n in names]
    joiner = users["joiner"].cookie

    measured: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (kind, side), app in RUNS.items():
        name = f"{kind}-{side}"
        ctx.log(f"sockets: {name}, {sizes} sockets")
        server = AsgiServer(
            db, server=kind, app=app, name=name, env={"PRESENCE_KEY_PREFIX": f"bws-{name}"}
        )
        ctx.on_close(server.stop)
        with server:
            measured[kind, side] = client_run(ctx, server, cookies, joiner, sizes, folder)
        for r in measured[kind, side]:
            ctx.log(
                f"  {r['sockets']:>6} sockets: {r['ack']['acks_per_s']:,.0f} acks/s, "
                f"{r['rss_per_socket'] / 1024:.1f} KiB/socket, join p99 "
                f"{p99(r):.1f} ms ({r['delivery']['missing']} missing)"
            )

    rows: list[Row] = []
    for kind in SERVERS:
        for ours, bare in zip(measured[kind, "ours"], measured[kind, "bare"], strict=True):
            n = ours["sockets"]
            details = {"ours": _summary(ours), "bare": _summary(bare)}
            held = [
                Check(
                    f"{n:,} sockets held and answered, every delivery made",
                    faults(ours) + faults(bare),
                    "<=",
                    0,
                )
            ]
            if n == sizes[-1] and not ctx.quick:
                held.append(Check("10 k sockets in one process", n, ">=", 10_000))
            rows.append(
                Row(
                    bench="6 sockets",
                    metric=f"{kind}: heartbeat acks/s, {n:,} sockets",
                    ours=ours["ack"]["acks_per_s"],
                    unit="/s",
                    baseline=bare["ack"]["acks_per_s"],
                    baseline_label="bare consumer",
                    checks=held,
                    details=details,
                )
            )
            rows.append(
                Row(
                    bench="6 sockets",
                    metric=f"{kind}: RSS per socket, {n:,} sockets",
                    ours=ours["rss_per_socket"] / 1024,
                    unit="KiB",
                    baseline=bare["rss_per_socket"] / 1024,
                    baseline_label="bare consumer",
                )
            )
            rows.append(
                Row(
                    bench="6 sockets",
                    metric=f"{kind}: join -> presence.join p99, room of {ROOM_SIZE}, {n:,} sockets",
                    ours=p99(ours),
                    unit="ms",
                    baseline=p99(bare),
                    baseline_label="bare group_send",
                    checks=[Check(f"<= {P99_TARGET_MS:g} ms", p99(ours), "<=", P99_TARGET_MS)],
                )
            )
            for side, label in (
                ("default-gc", "with CPython's collector as it comes"),
                ("cpython-gc", "with the start-up frozen and CPython's thresholds"),
            ):
                if (kind, side) in measured:
                    other = measured[kind, side][sizes.index(n)]
                    rows.append(
                        Row(
                            bench="6 sockets",
                            metric=f"{kind}: join p99 {label}, {n:,} sockets",
                            ours=p99(other),
                            unit="ms",
                            baseline=p99(ours),
                            baseline_label="project/asgi.py",
                            details={side: _summary(other)},
                        )
                    )
    return rows


def faults(result: dict[str, Any]) -> int:
    """Sockets closed, sockets that got no ack, deliveries that never came: all should be 0."""
    return (
        result["sockets"]
        - result["open_sockets"]
        + result["ack"]["silent_sockets"]
        + result["delivery"]["missing"]
    )


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """The client's result without the raw latency samples, with their percentiles."""
    samples = result["delivery"]["latency_ms"]
    delivery = {k: v for k, v in result["delivery"].items() if k != "latency_ms"}
    if samples:
        delivery.update({f"p{p}_ms": percentile(samples, p) for p in (50, 90, 99)})
        delivery["max_ms"] = samples[-1]
    return {**{k: v for k, v in result.items() if k != "delivery"}, "delivery": delivery}
