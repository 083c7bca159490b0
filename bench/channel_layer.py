"""9. The channel layer for many ASGI workers: channels-redis' ``RedisChannelLayer`` (the "core"
layer: groups in sorted sets, messages in per-process sorted sets popped with BZPOPMIN) against
its ``RedisPubSubChannelLayer`` (groups are Redis pub/sub channels; each process subscribes once
per group and fans out to its own consumers in memory), on the same Redis, in the same run.

The shape is presence's: receiver *processes* (ASGI workers) each hold ``members`` consumer
channels, all in one group (a room); a sender process does ``group_send`` to that group, as
``presence_app.core.dispatch`` does for every join, leave, update and typing event.

- latency: one ``group_send`` every 20 ms (no queueing); per delivery, the time from just before
  ``group_send`` to the consumer's ``receive()`` returning it (one host, one clock). p50 / p99.
- throughput: ``group_send`` back to back (each awaited, as dispatch sends one group's events
  in order); deliveries per second from the first send to the last delivery, the sender's
  group_send calls per second, deliveries lost (the core layer drops past its per-channel
  ``capacity``, 100 messages by default), and Redis' own CPU time per 1,000 deliveries.

Both layers are configured as ``project/settings.py`` configures them (one host, no socket
timeout). Run: ``python -m bench --only channel_layer [--quick]``.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any

from .common import Check, Context, Row, benchmark, median, percentile

LAYERS = {
    "core": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}
GROUP = "bench.room"
LATENCY_GAP = 0.02


def make_layer(kind: str, url: str) -> Any:
    host = {"address": url, "socket_timeout": None, "socket_keepalive": True}
    if kind == "core":
        from channels_redis.core import RedisChannelLayer

        return RedisChannelLayer(hosts=[host])
    from channels_redis.pubsub import RedisPubSubChannelLayer

    return RedisPubSubChannelLayer(hosts=[host])


async def close(layer: Any) -> None:
    """Closes the layer's connections (the core layer's flush() would delete every group)."""
    if hasattr(layer, "close_pools"):
        await layer.close_pools()
    else:
        await layer.flush()  # the pub/sub layer: forgets its subscriptions, closes its connections


# -- a receiver: one ASGI worker's consumers ------------------------------------------------------
@dataclass
class Receiver:
    """One ASGI worker (a process of its own, ``run``): ``members`` consumer channels in GROUP.
    ``ready`` is set once they are in the group, ``delivered`` and ``last_at`` count the
    deliveries and time the last one while the sender sends, until ``stop``; then the latencies
    go to ``results``."""

    kind: str
    url: str
    members: int
    ready: Any
    stop: Any
    delivered: Any
    last_at: Any
    results: Any

    def run(self) -> None:
        asyncio.run(self._receive())

    async def _receive(self) -> None:
        layer = make_layer(self.kind, self.url)
        channels = [await layer.new_channel() for _ in range(self.members)]
        for channel in channels:
            await layer.group_add(GROUP, channel)
        latencies: dict[str, list[float]] = {"warmup": [], "latency": [], "burst": []}

        async def consume(channel: str) -> None:
            while True:
                message = await layer.receive(channel)
                now = time.time()
                latencies[message["phase"]].append(now - message["t"])
                self.delivered.value += 1
                self.last_at.value = now

        tasks = [asyncio.ensure_future(consume(c)) for c in channels]
        self.ready.set()
        while not self.stop.is_set():
            await asyncio.sleep(0.02)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in channels:
            await layer.group_discard(GROUP, channel)
        # Latencies are sampled to keep the pipe small: every delivery of a small group, ~20 k
        # else.
        step = max(1, len(latencies["latency"]) // 20_000)
        self.results.put(
            {"latency": latencies["latency"][::step], "burst_n": len(latencies["burst"])}
        )
        await close(layer)


# -- the sender ------------------------------------------------------------------------------------
async def _send(kind: str, url: str, phase: str, count: int, gap: float) -> list[float]:
    layer = make_layer(kind, url)
    starts = []
    for seq in range(count):
        t = time.time()
        starts.append(t)
        await layer.group_send(
            GROUP,
            {
                "type": "bench.event",
                "phase": phase,
                "seq": seq,
                "t": t,
                "user": "12345",
                "state": "online",
                "room": "lobby",
            },
        )
        if gap:
            await asyncio.sleep(gap)
    await close(layer)
    return starts


def _wait_for(counters: list[Any], expected: int, quiet: float = 1.0, limit: float = 60) -> int:
    """Waits until the receivers got ``expected`` deliveries, or nothing came for ``quiet`` s."""
    deadline = time.monotonic() + limit
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        total = sum(c.value for c in counters)
        if total >= expected:
            return total
        if total != last:
            last, since = total, time.monotonic()
        elif time.monotonic() - since > quiet:
            return total
        time.sleep(0.01)
    return sum(c.value for c in counters)


def redis_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(
    ctx: Context, kind: str, workers: int, members: int, latency_sends: int, burst_sends: int
) -> dict[str, Any]:
    url = ctx.redis.url
    client = ctx.redis.client()
    client.flushall()
    spawn = mp.get_context("spawn")
    stop, results = spawn.Event(), spawn.Queue()
    receivers = [
        Receiver(
            kind,
            url,
            members,
            spawn.Event(),
            stop,
            spawn.Value("q", 0, lock=False),
            spawn.Value("d", 0.0, lock=False),
            results,
        )
        for _ in range(workers)
    ]
    delivered = [r.delivered for r in receivers]
    procs = [spawn.Process(target=r.run, daemon=True) for r in receivers]
    for p in procs:
        p.start()
    try:
        for r in receivers:
            if not r.ready.wait(60):
                raise RuntimeError("a receiver did not start")
        group = workers * members
        # warm-up, not measured: connections opened, the pub/sub layer's reader past its first
        # 0.1 s poll (messages of a process' first ~100 ms of subscriptions wait for it)
        asyncio.run(_send(kind, url, "warmup", 10, LATENCY_GAP))
        base = _wait_for(delivered, group * 10)
        # latency: spaced sends
        asyncio.run(_send(kind, url, "latency", latency_sends, LATENCY_GAP))
        got_latency = _wait_for(delivered, base + group * latency_sends) - base
        # throughput: back to back
        base = sum(c.value for c in delivered)
        cpu0, cmds0 = redis_cpu(client), client.info("stats")["total_commands_processed"]
        t0 = time.time()
        starts = asyncio.run(_send(kind, url, "burst", burst_sends, 0))
        sent_s = time.time() - t0
        got = _wait_for(delivered, base + group * burst_sends) - base
        cpu1, cmds1 = redis_cpu(client), client.info("stats")["total_commands_processed"]
        end = max(r.last_at.value for r in receivers)
        stop.set()
        samples, burst_n = [], 0
        for _ in procs:
            r = results.get(timeout=60)
            samples += r["latency"]
            burst_n += r["burst_n"]
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    ms = sorted(s * 1000 for s in samples)
    return {
        "layer": kind,
        "workers": workers,
        "members_per_worker": members,
        "group_size": group,
        "latency_sends": latency_sends,
        "latency_delivered": got_latency,
        "latency_expected": group * latency_sends,
        "p50_ms": percentile(ms, 50) if ms else None,
        "p99_ms": percentile(ms, 99) if ms else None,
        "max_ms": ms[-1] if ms else None,
        "burst_sends": burst_sends,
        "burst_expected": group * burst_sends,
        "burst_delivered": got,
        "burst_lost": group * burst_sends - got,
        "group_sends_per_s": burst_sends / sent_s,
        "deliveries_per_s": got / max(1e-9, end - starts[0]) if got else 0.0,
        "redis_cpu_ms_per_1000_deliveries": (cpu1 - cpu0) * 1e6 / max(1, got),
        "redis_cpu_ms_per_group_send": (cpu1 - cpu0) * 1e3 / burst_sends,
        "redis_commands_per_group_send": (cmds1 - cmds0) / burst_sends,
    }


def compare(metric: str, key: str, unit: str, pubsub: dict, core: dict, **extra: Any) -> Row:
    """A row of the pub/sub layer's figure ``key`` against the core layer's."""
    return Row(
        bench="9 channel_layer",
        metric=metric,
        ours=pubsub[key],
        unit=unit,
        baseline=core[key],
        baseline_label="RedisChannelLayer",
        **extra,
    )


@benchmark(
    "channel_layer", "9. channel layer fan-out: RedisChannelLayer vs RedisPubSubChannelLayer"
)
def run(ctx: Context) -> list[Row]:
    # (receiver processes, consumers each): a small room, a big room spread over the workers
    cases = [(2, 5), (2, 500)] if ctx.quick else [(2, 5), (2, 500), (4, 1000)]
    latency_sends = ctx.size(100, 40)
    burst_sends = ctx.size(2000, 500)
    rows: list[Row] = []
    for workers, members in cases:
        found = {}
        for kind in ("core", "pubsub", "core", "pubsub") if not ctx.quick else ("core", "pubsub"):
            ctx.log(f"channel layer {kind}: {workers} workers x {members} consumers")
            r = measure(
                ctx,
                kind,
                workers,
                members,
                latency_sends,
                burst_sends if members < 100 else max(50, burst_sends // 10),
            )
            found.setdefault(kind, []).append(r)
        # two alternating runs each (full mode): the median of each figure
        merged = {
            kind: {
                k: (median([r[k] for r in rs]) if isinstance(rs[0][k], float) else rs[0][k])
                for k in rs[0]
            }
            | {"runs": rs}
            for kind, rs in found.items()
        }
        core, pubsub = merged["core"], merged["pubsub"]
        size = f"{workers} workers x {members}"
        rows += [
            compare(
                f"group_send -> receive p50, {size}",
                "p50_ms",
                "ms",
                pubsub,
                core,
                details={"pubsub": pubsub, "core": core},
            ),
            compare(f"group_send -> receive p99, {size}", "p99_ms", "ms", pubsub, core),
            compare(
                f"deliveries/s back to back, {size}",
                "deliveries_per_s",
                "/s",
                pubsub,
                core,
                checks=[Check("pub/sub loses nothing", pubsub["burst_lost"], "<=", 0)],
            ),
            compare(
                f"Redis CPU per group_send, {size}",
                "redis_cpu_ms_per_group_send",
                "ms",
                pubsub,
                core,
            ),
        ]
    return rows


if __name__ == "__main__":  # a quick look without the harness
    from .common import table

    context = Context(quick=True)
    try:
        print(table(run(context)))
    finally:
        context.close()
