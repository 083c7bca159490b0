"""11. SSE streams end to end: one ASGI process (uvicorn, then daphne) holding 1 k and 5 k
presence streams (``GET /presence/sse/``, one authenticated user each), beside the same process
holding as many WebSockets, measured one after the other in the same run.

The load is bench/sse_client.py, another process: the server's RSS per connection, and the
delivery of a joiner's ``presence.join`` to a room of 100 members (SSE streams joined by REST
POSTs, or sockets), timed from the moment the join was sent. Servers and settings are benchmark
6's (tests/servers.py, bench/ws_settings.py: the project's ASGI application as shipped).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tests.servers import AsgiServer, Database

from .common import Check, Context, Row, benchmark, percentile, worker_results

SERVERS = ("uvicorn", "daphne")
TRANSPORTS = ("sse", "ws")
ROOM_SIZE = 100
P99_TARGET_MS = 50.0


def client_run(
    ctx: Context,
    server: AsgiServer,
    transport: str,
    cookies: list[str],
    joiner: str,
    sizes: list[int],
    folder: Path,
) -> list[dict[str, Any]]:
    config = {
        "host": "127.0.0.1",
        "port": server.port,
        "server_pid": server.pid,
        "transport": transport,
        "cookies": cookies,
        "joiner_cookie": joiner,
        "sizes": sizes,
        "room_size": ROOM_SIZE,
        "cycles": ctx.size(40, 10),
        "beat_every": 10.0,
        "deliver_timeout": 5.0,
        "settle": ctx.size(3, 1),
    }
    path = folder / f"client-{server.name}.json"
    path.write_text(json.dumps(config))
    results = worker_results(
        "bench.sse_client",
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


def faults(result: dict[str, Any]) -> int:
    """Connections that closed and deliveries that never came: both should be 0."""
    return result["connections"] - result["open"] + result["delivery"]["missing"]


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    samples = result["delivery"]["latency_ms"]
    delivery = {k: v for k, v in result["delivery"].items() if k != "latency_ms"}
    if samples:
        delivery.update({f"p{p}_ms": percentile(samples, p) for p in (50, 90, 99)})
    return {**{k: v for k, v in result.items() if k != "delivery"}, "delivery": delivery}


@benchmark("sse", "11. SSE streams end to end")
def run(ctx: Context) -> list[Row]:
    sizes = [ctx.size(1000, 200), ctx.size(5000, 500)]
    folder = Path(tempfile.mkdtemp(prefix="bench-sse-"))
    ctx.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    db = Database(
        folder / "db.sqlite3", settings="bench.ws_settings", env={"REDIS_URL": ctx.redis.url}
    ).migrate()
    names = [f"u{i}" for i in range(sizes[-1])]
    ctx.log(f"sse: {len(names) + 1} users and sessions")
    users = db.users([*names, "joiner"])
    cookies = [users[n].cookie for n in names]
    joiner = users["joiner"].cookie

    measured: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for kind in SERVERS:
        for transport in TRANSPORTS:
            name = f"{kind}-{transport}"
            ctx.log(f"sse: {name}, {sizes} connections")
            server = AsgiServer(
                db, server=kind, name=name, env={"PRESENCE_KEY_PREFIX": f"bsse-{name}"}
            )
            ctx.on_close(server.stop)
            with server:
                measured[kind, transport] = client_run(
                    ctx, server, transport, cookies, joiner, sizes, folder
                )
            for r in measured[kind, transport]:
                ctx.log(
                    f"  {r['connections']:>6} {transport}: "
                    f"{r['rss_per_connection'] / 1024:.1f} KiB each, join p99 {p99(r):.1f} ms "
                    f"({r['delivery']['missing']} missing, {r['open']} open, "
                    f"{r['connect_retries']} handshakes retried)"
                )

    rows: list[Row] = []
    for kind in SERVERS:
        for sse, ws in zip(measured[kind, "sse"], measured[kind, "ws"], strict=True):
            n = sse["connections"]
            details = {"sse": _summary(sse), "ws": _summary(ws)}
            rows.append(
                Row(
                    bench="11 sse",
                    metric=f"{kind}: join -> presence.join p99, room of {ROOM_SIZE}, {n:,} streams",
                    ours=p99(sse),
                    unit="ms",
                    baseline=p99(ws),
                    baseline_label="WebSockets",
                    checks=[
                        Check(f"{n:,} streams held, every delivery made", faults(sse), "<=", 0),
                        Check(f"<= {P99_TARGET_MS:g} ms", p99(sse), "<=", P99_TARGET_MS),
                    ],
                    details=details,
                )
            )
            rows.append(
                Row(
                    bench="11 sse",
                    metric=f"{kind}: RSS per stream, {n:,} streams",
                    ours=sse["rss_per_connection"] / 1024,
                    unit="KiB",
                    baseline=ws["rss_per_connection"] / 1024,
                    baseline_label="WebSockets",
                )
            )
    return rows
