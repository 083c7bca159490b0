"""The least a frame to a socket costs here: the floor under benchmark 17's room states.

Benchmark 17's room-state phase sends every watcher of a room a frame a tick; at its size (5,000
sockets, 20 ticks a second) that is 100,000 frames a second, each paid by a server and by the
load client on the same 2 cores. This measures what one such frame costs with nothing of
presence in the way: uvicorn (as the project serves, without permessage-deflate unless said)
sending one prepared text to every socket it holds, in a loop, from

- ``raw``: a bare ASGI application (the server's own cost: its WebSocket framing and the
  transport's write);
- ``channels``: Channels' ``AsyncWebsocketConsumer`` beneath its middlewares (``base_send``, as
  presence's sockets send their frames);
- ``channels-send``: the same through the consumer's ``send()`` and the middleware stack;
- ``raw-deflate``: the bare application with permessage-deflate, which a browser asks for
  (each socket compresses in its own context).

The load client (bench/frame_floor_client.js, Node's ``ws`` as benchmark 17's) holds the sockets
and counts what arrives. The server's CPU is its whole process tree's (``/proc``) from the
client's go to its last frame received (a server may write after its loop has handed the frames
over: a server's own threads), beside its loop's own (``time.process_time`` around it); the
client's is ``process.cpuUsage``. One run a variant, the variants one after the other.

To find a cheaper write, ``--ws`` runs each variant under each of uvicorn's WebSocket
implementations named (``websockets-sansio``, its ``auto``; ``websockets``; ``wsproto``, which
needs the ``wsproto`` package), and ``--servers`` under other ASGI servers (``daphne``;
``granian``, a server whose sockets are Rust's, which needs the ``granian`` package), without
permessage-deflate.

Run: ``python -m bench.frame_floor [--sockets 5000] [--rounds 20] [--ws IMPL,...]
[--servers uvicorn,daphne,granian] [--states N]`` (``--states``: a frame of N members' states,
as benchmark 17's room-state phase sends ~50 at 5,000 sockets).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from presence_app.testing import free_port

from .big_rooms import client_kind
from .common import cpu_seconds

#: A room-state frame of one member (~110 bytes), or of ``--states`` members (benchmark 17's
#: room-state phase at 5,000: ~50, ~3.7 kB).
STATES = int(os.environ.get("FRAME_FLOOR_STATES") or 1)  # --states: members a frame carries
TEXT = json.dumps(
    {
        "type": "presence.roomstate",
        "room": "big",
        "states": [
            {
                "user": str(4242 + n),
                "conn": f"a1b2c3d4e5f6a7b8{n:02x}",
                "data": {"x": 512, "y": 384},
            }
            for n in range(STATES)
        ],
    }
)
BENCH = Path(__file__).resolve().parent
VARIANTS = {
    "raw": ("bench.frame_floor:raw", False),
    "channels": ("bench.frame_floor:channels_application", False),
    "channels-send": ("bench.frame_floor:channels_application", False),
    "raw-deflate": ("bench.frame_floor:raw", True),
}

# -- the servers' side --------------------------------------------------------------------------
SENDS: list[Any] = []  # each socket's way out, as the variant sends


async def broadcast(rounds: int, skip: Any) -> str:
    """``rounds`` times the frame to every socket but ``skip`` (the one that asked): the
    frames sent, the CPU and the wall time it took."""
    cpu, wall, n = time.process_time(), time.perf_counter(), 0
    for _ in range(rounds):
        for send in list(SENDS):
            if send is not skip:
                await send()
                n += 1
        await asyncio.sleep(0)  # a tick: what else the loop has to do runs between rounds
    return f"done {n} {time.process_time() - cpu:.4f} {time.perf_counter() - wall:.4f}"


async def raw(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The bare ASGI application."""
    if scope["type"] != "websocket":
        return
    await receive()
    await send({"type": "websocket.accept"})
    message = {"type": "websocket.send", "text": TEXT}

    async def out() -> None:
        await send(message)

    SENDS.append(out)
    try:
        while (got := await receive())["type"] != "websocket.disconnect":
            if (got.get("text") or "").startswith("go "):
                done = await broadcast(int(got["text"].split()[1]), out)
                await send({"type": "websocket.send", "text": done})
    finally:
        SENDS.remove(out)


def channels_application() -> Any:
    """Channels' consumer behind its usual stack (``uvicorn --factory``)."""
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="frame-floor",
        ALLOWED_HOSTS=["*"],
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes",
                        "django.contrib.sessions", "channels"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    )  # fmt: skip
    django.setup()
    from channels.auth import AuthMiddlewareStack
    from channels.generic.websocket import AsyncWebsocketConsumer
    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import path

    through_send = os.environ.get("FRAME_FLOOR_VARIANT") == "channels-send"

    class Consumer(AsyncWebsocketConsumer):
        async def connect(self) -> None:
            await self.accept()
            message = {"type": "websocket.send", "text": TEXT}

            async def out() -> None:
                await (self.send(text_data=TEXT) if through_send else self.base_send(message))

            self.out = out
            SENDS.append(out)

        async def disconnect(self, code: int) -> None:
            SENDS.remove(self.out)

        async def receive(self, text_data: str | None = None, bytes_data: Any = None) -> None:
            if (text_data or "").startswith("go "):
                done = await broadcast(int(text_data.split()[1]), self.out)
                await self.send(text_data=done)

    routes = URLRouter([path("", Consumer.as_asgi())])
    return ProtocolTypeRouter({"websocket": AuthMiddlewareStack(routes)})


def __getattr__(name: str) -> Any:
    """``bench.frame_floor:channels``, for a server that takes no factory (daphne)."""
    if name == "channels":
        return channels_application()
    raise AttributeError(name)


# -- the run ------------------------------------------------------------------------------------
def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and every process under it (a server's workers)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_seconds(p)
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += map(int, f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass  # ended meanwhile
    return total


def server_command(server: str, app: str, port: int, ws: str, deflate: bool) -> list[str]:
    where = ["--host", "127.0.0.1", "--port", str(port)]
    if server == "daphne":
        app = app.replace("channels_application", "channels")  # (no factory)
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0", app]
    if server == "granian":
        return [sys.executable, "-m", "granian", "--interface", "asgi", *where, "--workers", "1",
                "--log-level", "warning", "--no-access-log",
                *(["--factory"] if app.endswith("channels_application") else []), app]  # fmt: skip
    command = [sys.executable, "-m", "uvicorn", app, *where, "--log-level", "warning",
               "--lifespan", "off", "--ws", ws]  # fmt: skip
    if app.endswith("channels_application"):
        command.append("--factory")
    if not deflate:
        command += ["--ws-per-message-deflate", "false"]
    return command


def run(
    variant: str, sockets: int, rounds: int, ws: str = "auto", server: str = "uvicorn"
) -> dict[str, float]:
    app, deflate = VARIANTS[variant]
    if deflate and server != "uvicorn":
        raise SystemExit(f"{variant}: permessage-deflate is measured on uvicorn only")
    port = free_port()
    env = {**os.environ, "FRAME_FLOOR_VARIANT": variant}
    proc = subprocess.Popen(
        server_command(server, app, port, ws, deflate), env=env, cwd=BENCH.parent
    )
    try:
        wait_for_port(port, timeout=30)
        client = subprocess.Popen(
            ["node", str(BENCH / "frame_floor_client.js"), str(port), str(sockets), str(rounds),
             "1" if deflate else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert client.stdin is not None and client.stdout is not None
        if client.stdout.readline().strip() != "ready":  # every socket open
            raise RuntimeError(f"the load client failed ({client.wait()})")
        before = tree_cpu(proc.pid)
        client.stdin.write("go\n")
        client.stdin.flush()
        last = client.stdout.readline()  # after the last frame came
        tree = tree_cpu(proc.pid) - before
        client.wait(timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    reply = json.loads(last)
    _, frames, cpu, wall = reply["server"].split()
    n = int(frames)
    assert reply["received"] == n, reply
    return {
        "frames": n,
        "server_us": tree / n * 1e6,
        "loop_us": float(cpu) / n * 1e6,
        "client_us": reply["client_cpu_s"] / n * 1e6,
        "wall_s": float(wall),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sockets", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--ws", default="auto", help="uvicorn --ws implementations, by commas")
    parser.add_argument("--servers", default="uvicorn", help="uvicorn, daphne, granian, by commas")
    parser.add_argument("--states", type=int, default=1, help="members' states a frame carries")
    args = parser.parse_args()
    os.environ["FRAME_FLOOR_STATES"] = str(args.states)  # the servers' TEXT
    try:  # Node's client, whatever BENCH_BIG_ROOMS_CLIENT chooses for benchmark 17
        client_kind("node")
    except RuntimeError:
        raise SystemExit("frame_floor needs node (18+) and npm (bench/package.json's ws)") from None
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"| {args.sockets:,} sockets, {args.rounds} rounds | server CPU a frame (its loop's) | "
          "load client CPU a frame | both, cores for 100,000 frames a second |")  # fmt: skip
    print("| --- | --- | --- | --- |")
    for variant in args.variants.split(","):
        for server in args.servers.split(","):
            for ws in args.ws.split(",") if server == "uvicorn" else ["auto"]:
                got = run(variant, args.sockets, args.rounds, ws, server)
                cores = (got["server_us"] + got["client_us"]) / 10  # x 100,000 a second / 1e6
                name = variant + ("" if server == "uvicorn" else f", {server}")
                name += "" if ws == "auto" else f", --ws {ws}"
                print(f"| {name} | {got['server_us']:.1f} us ({got['loop_us']:.1f}) | "
                      f"{got['client_us']:.1f} us | {cores:.2f} |")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
