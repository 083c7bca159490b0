"""10. Fan-out at celebrity scale (issue 16): one user's status change reaching 10 k / 100 k
watchers held by 2 server processes, and a 10,000-member room's snapshot and join.

Change (``fanout``): two *server* processes each hold half the watchers, as consumer channels
of a channel layer in the watchers' group of one user (what ``PresenceSession.watch`` does for
each socket); a *sender* process (Django set up, the project's code) changes that user's status
with ``presence.aset_status``, once per round, alternating dnd / online. Per change: the time
from just before the call to the last watcher's ``receive()`` (one host, one clock), the
channel-layer messages the sender made (``group_send`` + ``send`` calls, counted on the layer)
and the Redis commands run from the call until the last delivery (``INFO commandstats``: the
sender's, the layer's and the receivers' own, e.g. the core layer's BZPOPMIN). Three ways, in
the same run, on the same Redis, rounds alternating:

- ``ours``: the front door on ``RedisPubSubChannelLayer`` (the project's layer): one
  ``group_send`` per group = one PUBLISH; each server process receives it once and hands it to
  its local consumers.
- ``per_watcher``: the same event sent to each watcher's channel (``layer.send`` per socket, on
  the same pub/sub layer, 500 at a time): a dispatcher that fans out itself.
- ``core``: the front door on ``RedisChannelLayer``: its ``group_send`` writes one message per
  member channel inside Redis (one Lua call per process' inbox, N entries).

Room (``room_10k``, in the sender process): 10,000 members in one room; a new socket's
``PresenceSession.join`` (group, lease, paged snapshot) and ``send_room_state`` alone: frames,
the largest frame, time to the first and to the last frame, against the single-frame snapshot
this replaced (``room_members`` + one ``get_many`` of all + one frame), alternating.

Run: ``python -m bench --only fanout [--quick]`` (quick: 10 k watchers; full: 10 k and 100 k).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from typing import Any

from .common import Check, Context, Row, benchmark, median

CELEBRITY = "celebrity"
LAYERS = {
    "core": "channels_redis.core.RedisChannelLayer",
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}
#: Per-watcher sends in flight at once (the sender's pool; one send = one PUBLISH).
SEND_AT_ONCE = 100
#: A per-watcher round that has not sent everything by then is cut (it stalled once at 100 k
#: on a loaded machine: channels-redis' publish never returned); its deliveries show it.
SEND_LIMIT = 240.0


def make_layer(kind: str, url: str) -> Any:
    from .channel_layer import make_layer as make

    return make(kind, url)


# -- a server process: half the watchers ------------------------------------------------------
@dataclass
class Server:
    kind: str
    url: str
    group: str
    members: int
    ready: Any
    stop: Any
    delivered: Any
    last_at: Any
    names: Any

    def run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        layer = make_layer(self.kind, self.url)
        channels = [await layer.new_channel() for _ in range(self.members)]
        for i in range(0, len(channels), 50):  # the core layer's pool holds few connections
            await asyncio.gather(*(layer.group_add(self.group, c) for c in channels[i : i + 50]))

        async def consume(channel: str) -> None:
            while True:
                await layer.receive(channel)
                self.delivered.value += 1
                self.last_at.value = time.time()

        tasks = [asyncio.ensure_future(consume(c)) for c in channels]
        await asyncio.sleep(0.5)  # the receive loops subscribed / polling
        self.names.put(channels)
        self.ready.set()
        while not self.stop.is_set():
            await asyncio.sleep(0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        from .channel_layer import close

        await close(layer)


# -- the sender: Django and the project's code -------------------------------------------------
def setup_django(url: str, kind: str) -> None:
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "presence_app"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        PRESENCE={"REDIS_URL": url, "KEY_PREFIX": "bench16"},
        CHANNEL_LAYERS={
            "default": {
                "BACKEND": LAYERS[kind],
                "CONFIG": {
                    "hosts": [{"address": url, "socket_timeout": None, "socket_keepalive": True}]
                },
            }
        },
        USE_TZ=True,
        SECRET_KEY="bench-fanout",  # a connection's public id is keyed by it (realtime/roomstate)
    )
    import django

    django.setup()


def answer(conn: Any, proc: Any, timeout: float = 600.0) -> Any:
    """The sender process' next answer; raises when it died (its traceback is on stderr) or
    said nothing for ``timeout`` seconds, instead of waiting for ever."""
    deadline = time.monotonic() + timeout
    while not conn.poll(1.0):
        if not proc.is_alive():
            raise RuntimeError(f"the sender process died (exit code {proc.exitcode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sender process said nothing for {timeout:.0f} s")
    return conn.recv()


def sender(url: str, kind: str, conn: Any) -> None:
    """Serves ``conn`` commands: ("group",) -> the watchers' group name; ("change", mode,
    state, channels) -> (t0, layer messages); ("room", members, rounds) -> room figures."""
    setup_django(url, kind)
    asyncio.run(_sender(url, conn))


class Counting:
    """The channel layer with its messages counted (group_send and send calls)."""

    def __init__(self, layer: Any) -> None:
        self.layer, self.messages = layer, 0
        self.group_send_orig, self.send_orig = layer.group_send, layer.send

        async def group_send(group: str, message: dict[str, Any]) -> None:
            self.messages += 1
            await self.group_send_orig(group, message)

        async def send(channel: str, message: dict[str, Any]) -> None:
            self.messages += 1
            await self.send_orig(channel, message)

        layer.group_send, layer.send = group_send, send


async def _sender(url: str, conn: Any) -> None:
    from channels.layers import get_channel_layer

    from presence_app import presence
    from presence_app.core import dispatch

    layer = get_channel_layer()
    counting = Counting(layer)
    await presence.aconnect("celebrity-socket", CELEBRITY)

    async def beat() -> None:  # the celebrity's socket stays online (LEASE_TTL is 90 s)
        while True:
            await asyncio.sleep(10)
            await presence.aheartbeat("celebrity-socket", CELEBRITY)

    beating = asyncio.ensure_future(beat())
    while True:
        command = await asyncio.to_thread(conn.recv)
        if command[0] == "group":
            conn.send(dispatch.watchers_group(CELEBRITY))
        elif command[0] == "change":
            _, mode, state, channels = command
            counting.messages = 0
            t0 = time.time()
            if mode == "per_watcher":
                event = {
                    "type": "presence.update",
                    "user": CELEBRITY,
                    "state": state,
                    "at": t0,
                    "message": "",
                    "emoji": "",
                }

                async def each(channels: list[str], event: dict[str, Any]) -> None:
                    for i in range(0, len(channels), SEND_AT_ONCE):
                        await asyncio.gather(
                            *(layer.send(c, event) for c in channels[i : i + SEND_AT_ONCE])
                        )

                try:
                    await asyncio.wait_for(each(channels, event), SEND_LIMIT)
                except TimeoutError:
                    pass
            else:
                await presence.aset_status(CELEBRITY, state)
            conn.send((t0, time.time() - t0, counting.messages))
        elif command[0] == "room":
            conn.send(await room_figures(layer, command[1], command[2]))
        else:
            break
    beating.cancel()


# -- the 10,000-member room --------------------------------------------------------------------
async def room_figures(layer: Any, members: int, rounds: int) -> dict[str, Any]:
    from presence_app import presence
    from presence_app.realtime.session import PresenceSession

    now = time.time()
    for i in range(0, members, 500):
        batch = range(i, min(members, i + 500))
        await asyncio.gather(*(presence.aconnect(f"c{n}", f"m{n}", now=now) for n in batch))
        await asyncio.gather(*(presence.ajoin("big", f"c{n}", f"m{n}", now=now) for n in batch))

    class Capture:
        def __init__(self) -> None:
            self.t0 = time.perf_counter()
            self.frames: list[tuple[float, int]] = []

        async def send(self, frame: dict[str, Any]) -> None:
            self.frames.append((time.perf_counter() - self.t0, len(json.dumps(frame))))

    async def single_frame(capture: Capture) -> None:  # the snapshot before issue 16
        ids = await presence.aroom_members("big")
        got = await presence.aget_many(ids, viewer="viewer")
        await capture.send(
            {
                "type": "presence.state",
                "room": "big",
                "members": [p.as_dict() for p in got.values()],
            }
        )

    out: dict[str, list[Any]] = {"paged": [], "single": [], "join": []}
    for r in range(rounds):
        for way in ("paged", "single"):
            capture = Capture()
            if way == "single":
                await single_frame(capture)
            else:
                session = PresenceSession(
                    "viewer", layer=layer, channel_name="bench.x", send=capture.send
                )
                await session.send_room_state("big")
            out[way].append(capture.frames)
        capture = Capture()
        session = PresenceSession(
            f"joiner{r}", layer=layer, channel_name=await layer.new_channel(), send=capture.send
        )
        await session.open()
        capture.frames.clear()  # the hello
        capture.t0 = time.perf_counter()
        await session.join("big")
        out["join"].append(capture.frames)
        await session.close()
    return out


# -- the driver --------------------------------------------------------------------------------
def _wait(counters: list[Any], expected: int, limit: float) -> int:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        total = sum(c.value for c in counters)
        if total >= expected:
            return total
        time.sleep(0.002)
    return sum(c.value for c in counters)


def commandstats(client: Any) -> dict[str, int]:
    return {
        k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in client.info("commandstats").items()
    }


def measure(
    ctx: Context,
    kind: str,
    watchers: int,
    rounds: int,
    modes: tuple[str, ...],
    baseline_rounds: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` changes per mode (``baseline_rounds`` of ``per_watcher``) with ``watchers``
    split over two server processes."""
    client = ctx.redis.client()
    client.flushall()
    spawn = mp.get_context("spawn")
    parent, child = spawn.Pipe()
    send_proc = spawn.Process(target=sender, args=(ctx.redis.url, kind, child), daemon=True)
    send_proc.start()
    parent.send(("group",))
    group = answer(parent, send_proc)
    stop, names = spawn.Event(), spawn.Queue()
    servers = [
        Server(
            kind,
            ctx.redis.url,
            group,
            watchers // 2,
            spawn.Event(),
            stop,
            spawn.Value("q", 0, lock=False),
            spawn.Value("d", 0.0, lock=False),
            names,
        )
        for _ in range(2)
    ]
    procs = [spawn.Process(target=s.run, daemon=True) for s in servers]
    for p in procs:
        p.start()
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    try:
        for s in servers:
            if not s.ready.wait(600):
                raise RuntimeError("a server process did not start")
        channels = [c for _ in servers for c in names.get(timeout=60)]
        counters = [s.delivered for s in servers]
        for r in range(rounds):
            for mode in modes:
                if mode == "per_watcher" and r >= (baseline_rounds or rounds):
                    continue
                base = sum(c.value for c in counters)
                before = commandstats(client)
                parent.send(
                    (
                        "change",
                        mode,
                        "dnd" if r % 2 == 0 else "online",
                        channels if mode == "per_watcher" else None,
                    )
                )
                t0, call_s, messages = answer(parent, send_proc)
                got = _wait(counters, base + watchers, limit=60) - base
                end = max(s.last_at.value for s in servers)
                after = commandstats(client)
                delta = {
                    k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)
                }
                delta["info"] = delta.get("info", 0) - 1  # commandstats' own INFO
                results[mode].append(
                    {
                        "delivered": got,
                        "last_ms": (end - t0) * 1000,
                        "call_ms": call_s * 1000,
                        "layer_messages": messages,
                        "redis_commands": sum(v for k, v in delta.items() if k != "info"),
                        "by_command": {k: v for k, v in delta.items() if v and k != "info"},
                    }
                )
                time.sleep(0.2)
        parent.send(("quit",))
    finally:
        stop.set()
        for p in [*procs, send_proc]:
            p.join(15)
            if p.is_alive():
                p.kill()
    return results


def room(ctx: Context, members: int, rounds: int) -> dict[str, Any]:
    client = ctx.redis.client()
    client.flushall()
    spawn = mp.get_context("spawn")
    parent, child = spawn.Pipe()
    proc = spawn.Process(target=sender, args=(ctx.redis.url, "pubsub", child), daemon=True)
    proc.start()
    try:
        parent.send(("room", members, rounds))
        out = answer(parent, proc)
        parent.send(("quit",))
    finally:
        proc.join(15)
        if proc.is_alive():
            proc.kill()
    return out


def _summary(runs: list[dict[str, Any]], key: str) -> float | None:
    return median([float(r[key]) for r in runs]) if runs else None


def _complete(runs: list[dict[str, Any]], watchers: int) -> list[dict[str, Any]]:
    """The rounds in which every watcher got the change (a time to the last one exists)."""
    return [r for r in runs if r["delivered"] >= watchers]


@benchmark("fanout", "10. fan-out: a status change to 10 k / 100 k watchers; a 10 k-member room")
def run(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    sizes = [10_000] if ctx.quick else [10_000, 100_000]
    rounds = ctx.size(5, 3)
    for watchers in sizes:
        ctx.log(f"fan-out: {watchers} watchers over 2 processes, pub/sub layer (ours, per watcher)")
        modes = ("ours", "per_watcher")
        # 100 k sends a round take ~half a minute: two rounds of that baseline
        pubsub = measure(
            ctx,
            "pubsub",
            watchers,
            rounds,
            modes,
            baseline_rounds=rounds if watchers <= 10_000 else 2,
        )
        ctx.log(f"fan-out: {watchers} watchers over 2 processes, core layer")
        core = measure(ctx, "core", watchers, rounds, ("ours",))["ours"]
        ours, per = pubsub["ours"], pubsub["per_watcher"]
        size = f"{watchers // 1000} k watchers / 2 processes"
        details = {"ours": ours, "per_watcher": per, "core": core, "load": os.getloadavg()}
        lost = sum(watchers - r["delivered"] for r in ours)
        details["per_watcher_lost"] = sum(watchers - r["delivered"] for r in per)
        for label, other in (("per-watcher sends", per), ("RedisChannelLayer", core)):
            complete = _complete(other, watchers)
            missed = sum(watchers - r["delivered"] for r in other)
            rows += [
                Row(
                    "10 fanout",
                    f"change -> last watcher, {size} "
                    f"({label}: {len(complete)}/{len(other)} rounds complete)",
                    _summary(ours, "last_ms"),
                    "ms",
                    _summary(complete, "last_ms"),
                    label,
                    checks=[Check("every watcher got every change", lost, "<=", 0)],
                    details=details if label == "per-watcher sends" else {},
                ),
                Row(
                    "10 fanout", f"deliveries missing within 60 s, {size}", lost, "", missed, label
                ),
                Row(
                    "10 fanout",
                    f"channel-layer messages per change, {size}",
                    _summary(ours, "layer_messages"),
                    "",
                    _summary(other, "layer_messages"),
                    label,
                ),
                Row(
                    "10 fanout",
                    f"Redis commands per change, {size}",
                    _summary(ours, "redis_commands"),
                    "",
                    _summary(other, "redis_commands"),
                    label,
                ),
            ]
    ctx.log("fan-out: a 10,000-member room's snapshot and join")
    figures = room(ctx, 10_000, ctx.size(5, 3))

    def first_last(frames_runs: list[list[tuple[float, int]]]) -> tuple[float, float, int, int]:
        return (
            median([f[0][0] * 1000 for f in frames_runs]),
            median([f[-1][0] * 1000 for f in frames_runs]),
            max(len(f) for f in frames_runs),
            max(b for f in frames_runs for _, b in f),
        )

    paged, single, join = (first_last(figures[k]) for k in ("paged", "single", "join"))
    details = {"paged": paged, "single": single, "join": join}
    rows += [
        Row(
            "10 fanout",
            "10 k room snapshot: first frame",
            paged[0],
            "ms",
            single[0],
            "one 10 k frame",
            details=details,
        ),
        Row(
            "10 fanout",
            "10 k room snapshot: last frame",
            paged[1],
            "ms",
            single[1],
            "one 10 k frame",
        ),
        Row(
            "10 fanout",
            "10 k room snapshot: largest frame",
            paged[3],
            "B",
            single[3],
            "one 10 k frame",
            checks=[Check("a frame stays under 64 KiB", paged[3], "<=", 65536)],
        ),
        Row("10 fanout", f"10 k room: join -> snapshot complete ({join[2]} frames)", join[1], "ms"),
    ]
    return rows


if __name__ == "__main__":  # a quick look without the harness
    from .common import table

    context = Context(quick=True)
    try:
        print(table(run(context)))
    finally:
        context.close()
