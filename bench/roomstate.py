"""13. Live room state: 100 members in one room, each moving a cursor at 30 Hz, over 2 server
processes, against the naive design in the same run.

Two *server* processes (Django set up, the project's code, ``RedisPubSubChannelLayer``) each
hold 50 members as real :class:`~presence_app.realtime.session.PresenceSession` objects: a lease, the
room joined, a channel in the room's group, and a loop handing that channel's events to the
session, as a socket's consumer does. Every ``1 / 30`` s each member's cursor moves (``{"x": k,
"t": <wall clock>}``). Two ways, one after the other, on the same Redis and processes:

- ``ours``: ``PresenceSession.set_room_state``: the process's coalescer flushes once per tick
  (``ROOM_STATE_RATE`` 20): one ``group_send`` per room with all its members' latest states and
  one round trip writing them; each receiving session sends its socket one frame per tick.
- ``naive``: per change, a Redis write of the state and a ``group_send`` to every socket of
  the room (its sockets' group), and each receiver sends its socket one frame per event.

Per way: delivery latency (receive time minus the change's wall clock, of one state delivered in
:data:`SAMPLE`; one host, one clock) p50 / p99, ``presence.roomstate`` frames and bytes per second
per socket (what the session's ``send`` was handed, JSON-encoded as a socket's would be), Redis commands per second (``INFO commandstats`` over the
run and its drain: the EVALSHA and PUBLISH calls clients made, and every command including those
a script runs), and for ours whether every receiver got every sender's last value.

Run: ``python -m bench --only roomstate [--quick]`` (quick: 3 s a way; full: 30 s, as issue 29 asks).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import time
from typing import Any

from .common import Check, Context, Row, benchmark, percentile

ROOM = "cursors"
HZ = 30
MEMBERS = 100
#: After the senders stop: time for what is in flight to arrive (and to be counted).
DRAIN = 1.5
#: One delivered state in SAMPLE has its latency recorded (the percentiles' sample).
SAMPLE = 4


def setup_django(url: str) -> None:
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        SECRET_KEY="bench-roomstate",
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "presence_app"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        PRESENCE={"REDIS_URL": url, "KEY_PREFIX": "bench14", "ROOM_STATE_RATE": 20},
        CHANNEL_LAYERS={
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {
                    "hosts": [{"address": url, "socket_timeout": None, "socket_keepalive": True}]
                },
            }
        },
        USE_TZ=True,
    )
    import django

    django.setup()


class Recorder:
    """What the sockets of one process were sent during a run: frames, bytes, latencies, and
    the last value each receiver saw of each sender.

    The frame's JSON encoding is counted (a socket's ``send_json`` does it on the server); the
    rest is the browser's work, which runs in the server processes here, so it is kept small:
    the latency of one state in :data:`SAMPLE` (a different one per receiver: every sender is
    sampled), and the latest value per sender."""

    def __init__(self) -> None:
        self.reset("idle", 0.0)

    def reset(self, mode: str, since: float) -> None:
        self.mode, self.since = mode, since
        self.frames = self.bytes = self.delivered = 0
        self.latencies: list[float] = []
        self.last: dict[int, dict[str, int]] = {}

    def frame(self, receiver: int, own: str, frame: dict[str, Any]) -> None:
        if frame.get("type") != "presence.roomstate" or time.time() < self.since:
            return
        states = frame["states"]
        if len(states) == 1 and (states[0]["user"] == own or not states[0]["data"]):
            return  # the naive design echoes a socket its own change
        now = time.time()
        self.frames += 1
        self.delivered += len(states)  # a socket is never sent its own state but by the naive way
        self.bytes += len(json.dumps(frame))
        self.last.setdefault(receiver, {}).update(
            (st["user"], st["data"]["x"]) for st in states if st["data"] and st["user"] != own
        )
        self.latencies.extend(
            now - st["data"]["t"]
            for st in states[receiver % SAMPLE :: SAMPLE]
            if st["data"] and st["user"] != own
        )


def server(url: str, index: int, members: int, conn: Any) -> None:
    setup_django(url)
    asyncio.run(_server(index, members, conn))


async def _server(index: int, members: int, conn: Any) -> None:
    from channels.layers import get_channel_layer

    from presence_app.core import dispatch
    from presence_app.core.connection import get_async_store
    from presence_app.realtime.session import PresenceSession

    layer = get_channel_layer()
    rec = Recorder()
    sessions: list[PresenceSession] = []
    for n in range(members):

        def send(frame: dict[str, Any], n: int = n) -> Any:
            rec.frame(n, sessions[n].user_id, frame)
            return asyncio.sleep(0)

        session = PresenceSession(
            f"u{index}-{n}", layer=layer, channel_name=await layer.new_channel(), send=send
        )
        sessions.append(session)
        await session.open()
        await session.join(ROOM)

    async def receive(n: int) -> None:
        s = sessions[n]
        while True:
            message = await layer.receive(s.channel_name)
            if rec.mode == "naive" and message.get("type") == "presence.roomstate":
                await s.send(message)  # no coalescing: a frame per event
            else:
                await s.event(message)

    loops = [asyncio.ensure_future(receive(n)) for n in range(members)]
    store, group = get_async_store(), dispatch.sockets_group(ROOM)

    async def naive(s: PresenceSession, data: dict[str, Any], text: str) -> None:
        # Not presence.apublish_room_states: its event goes to the room's feed, one a process,
        # which coalesces it per tick as ours does (issue 44); the naive design has none.
        entry = (s.user_id, s.public_id, s.conn_id, text)
        await store.gather(store.planned.set_room_states(ROOM, [entry]))
        state = {"user": s.user_id, "conn": s.public_id, "data": data}
        await layer.group_send(
            group, {"type": "presence.roomstate", "room": ROOM, "states": [state]}
        )

    conn.send("ready")
    while True:
        command = await asyncio.to_thread(conn.recv)
        if command[0] != "run":
            break
        _, mode, start_at, seconds = command
        rec.reset(mode, start_at)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        k = 0
        while time.time() < start_at + seconds:
            t = time.time()
            data = {"x": k, "t": t}
            if mode == "ours":
                for s in sessions:
                    await s.set_room_state(ROOM, data)
            else:  # a write and a group_send to every socket of the room, per change
                text = json.dumps(data)
                await asyncio.gather(*(naive(s, data, text) for s in sessions))
            k += 1
            await asyncio.sleep(max(0.0, start_at + k / HZ - time.time()))
        await asyncio.sleep(DRAIN)
        conn.send(
            {
                "sent": k,
                "frames": rec.frames,
                "bytes": rec.bytes,
                "latencies": rec.latencies,
                "delivered": rec.delivered,
                "last": {f"{r}|{u}": x for r, seen in rec.last.items() for u, x in seen.items()},
                "senders": [s.user_id for s in sessions],
            }
        )
    for task in loops:
        task.cancel()


def commandstats(client: Any) -> dict[str, int]:
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def measure(ctx: Context, seconds: float) -> dict[str, dict[str, Any]]:
    client = ctx.redis.client()
    client.flushall()
    spawn = mp.get_context("spawn")
    pipes, procs = [], []
    for index in range(2):
        parent, child = spawn.Pipe()
        proc = spawn.Process(
            target=server, args=(ctx.redis.url, index, MEMBERS // 2, child), daemon=True
        )
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    out: dict[str, dict[str, Any]] = {}
    try:
        for parent in pipes:
            if not parent.poll(120) or parent.recv() != "ready":
                raise RuntimeError("a server process did not start")
        for mode in ("ours", "naive"):
            ctx.log(f"roomstate: {MEMBERS} members at {HZ} Hz, {mode}, {seconds:.0f} s")
            time.sleep(0.5)
            before = commandstats(client)
            start_at = time.time() + 0.3
            for parent in pipes:
                parent.send(("run", mode, start_at, seconds))
            parts = [parent.recv() for parent in pipes]
            after = commandstats(client)
            by_command = {k: n - before.get(k, 0) for k, n in after.items() if k != "info"}
            by_command = {k: n for k, n in by_command.items() if n}
            commands = sum(by_command.values())
            senders = [u for p in parts for u in p["senders"]]
            sent_k = min(p["sent"] for p in parts)
            last_ok = total = 0
            for index, part in enumerate(parts):
                for r in range(MEMBERS // 2):
                    for u in senders:
                        if u == f"u{index}-{r}":
                            continue  # itself
                        total += 1
                        last_ok += part["last"].get(f"{r}|{u}", -1) >= sent_k - 1
            latencies = sorted(x * 1000 for p in parts for x in p["latencies"])
            out[mode] = {
                "p50": percentile(latencies, 50) if latencies else None,
                "p99": percentile(latencies, 99) if latencies else None,
                "delivered": sum(p["delivered"] for p in parts),
                # each change is for the other MEMBERS - 1 sockets
                "changes_sent": sum(p["sent"] for p in parts) * (MEMBERS // 2) * (MEMBERS - 1),
                "frames_per_socket_s": sum(p["frames"] for p in parts) / MEMBERS / seconds,
                "bytes_per_socket_s": sum(p["bytes"] for p in parts) / MEMBERS / seconds,
                "redis_commands_s": commands / (seconds + DRAIN),
                # the calls clients made: a script call counts once (its inner commands are in
                # the total above, which INFO commandstats counts one by one)
                "redis_calls_s": (by_command.get("evalsha", 0) + by_command.get("publish", 0))
                / (seconds + DRAIN),
                "changes_per_s": sum(p["sent"] for p in parts) * (MEMBERS // 2) / seconds,
                "redis_by_command": by_command,
                "last_value_pairs": (last_ok, total),
            }
        for parent in pipes:
            parent.send(("quit",))
    finally:
        for proc in procs:
            proc.join(15)
            if proc.is_alive():
                proc.kill()
    return out


@benchmark("roomstate", "13. live room state: 100 cursors at 30 Hz over 2 processes vs naive")
def run(ctx: Context) -> list[Row]:
    seconds = float(ctx.size(30, 3))
    got = measure(ctx, seconds)
    ours, naive = got["ours"], got["naive"]
    details = {**got, "load": os.getloadavg(), "seconds": seconds, "drain": DRAIN}
    label = "naive (a group_send per change)"
    fewer = naive["frames_per_socket_s"] / max(ours["frames_per_socket_s"], 1e-9)
    ok, total = ours["last_value_pairs"]
    size = f"{MEMBERS} members, {HZ} Hz, 2 processes"
    return [
        Row(
            "13 roomstate",
            f"delivery p50, {size}",
            ours["p50"],
            "ms",
            naive["p50"],
            label,
            details=details,
        ),
        Row(
            "13 roomstate",
            f"delivery p99, {size}",
            ours["p99"],
            "ms",
            naive["p99"],
            label,
            checks=[Check("p99 <= 100 ms", ours["p99"] or 1e9, "<=", 100)],
        ),
        Row(
            "13 roomstate",
            "state frames per second per socket",
            ours["frames_per_socket_s"],
            "",
            naive["frames_per_socket_s"],
            label,
            checks=[Check(">= 10x fewer frames than naive", fewer, ">=", 10)],
        ),
        Row(
            "13 roomstate",
            "state bytes per second per socket",
            ours["bytes_per_socket_s"],
            "B",
            naive["bytes_per_socket_s"],
            label,
        ),
        Row(
            "13 roomstate",
            "changes made per second (target 3,000: a sender that keeps up)",
            ours["changes_per_s"],
            "",
            naive["changes_per_s"],
            label,
        ),
        Row(
            "13 roomstate",
            "Redis calls per second (EVALSHA + PUBLISH)",
            ours["redis_calls_s"],
            "",
            naive["redis_calls_s"],
            label,
        ),
        Row(
            "13 roomstate",
            "Redis commands per second (inside scripts included)",
            ours["redis_commands_s"],
            "",
            naive["redis_commands_s"],
            label,
        ),
        Row(
            "13 roomstate",
            "states delivered / (changes x receivers), within the drain",
            ours["delivered"] / max(ours["changes_sent"], 1),
            "",
            naive["delivered"] / max(naive["changes_sent"], 1),
            label,
        ),
        Row(
            "13 roomstate",
            "receiver-sender pairs that got the last value (ours)",
            ok,
            "",
            total,
            "pairs",
            checks=[Check("every last value delivered", total - ok, "<=", 0)],
        ),
    ]


if __name__ == "__main__":  # a quick look without the harness
    from .common import table

    context = Context(quick=True)
    try:
        print(table(run(context)))
    finally:
        context.close()
