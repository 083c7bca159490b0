"""A rolling deploy, for tests/reliability/test_rolling_deploy.py and bench/rolling.py.

:class:`Front`: one address in front of several ASGI processes, as a load balancer's: a TCP
proxy (a process of its own) on a free loopback port that hands each new connection to the next
process that accepts it (round robin; a process that is down is skipped), then copies bytes both
ways until either side closes (then closes both). WebSockets, SSE streams and REST calls all go
through it unchanged.

    front = await Front([server_a, server_b]).start()
    Client(front, user), SseClient(front, user)   # front.port, .url, .origin, .ws_url
    front.served                                    # {server name: connections handed to it}

:class:`Rollout`: the clients behind it reconnecting as presence.js does, a socket at once
(connect, re-join), a stream after its ``retry:`` (resuming with its ``Last-Event-ID``), and
:meth:`Rollout.restart`, SIGTERM to one process and its start again, with what it cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from presence_app.testing import free_port
from tests.servers import AsgiServer, Loopback
from tests.sse_client import SseClient

from .clients import Client

ROOT = Path(__file__).resolve().parents[2]


class Front(Loopback):
    """The proxy, run in a process of its own (:func:`serve`): the clients' process, with
    thousands of connections to drive, must not also copy every byte of them."""

    def __init__(self, backends: list[Any]) -> None:
        self.backends = backends
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.counts = Path(tempfile.mkdtemp(prefix="front-")) / "served.json"

    @property
    def served(self) -> Counter[str]:
        """Connections handed to each backend so far, by its name."""
        names = {str(b.port): b.name for b in self.backends}
        with contextlib.suppress(OSError, ValueError):
            counts = json.loads(self.counts.read_text())
            return Counter({names[port]: n for port, n in counts.items()})
        return Counter()

    async def start(self) -> Front:
        ports = [str(b.port) for b in self.backends]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.rolling", str(self.counts), str(self.port)]
            + ports,
            cwd=ROOT,
        )
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()  # the front hands this one on too, and the process drops it
                return self
            if self.proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the front did not start (exit {self.proc.poll()})")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            await asyncio.to_thread(self.proc.wait, 10)
        shutil.rmtree(self.counts.parent, ignore_errors=True)


async def serve(counts: Path, port: int, backends: list[int]) -> None:
    """The front's process: hands each new connection on ``port`` to the next of ``backends``
    that accepts it (round robin; one that is down is skipped), then copies bytes both ways
    until either side closes (then closes both). ``counts``: how many each was handed (JSON)."""
    turn = 0
    served: Counter[str] = Counter()

    async def backend() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        nonlocal turn
        for _ in range(len(backends)):
            target = backends[turn % len(backends)]
            turn += 1
            with contextlib.suppress(OSError):
                pair = await asyncio.open_connection("127.0.0.1", target)
                served[str(target)] += 1
                counts.with_suffix(".new").write_text(json.dumps(served))
                counts.with_suffix(".new").replace(counts)  # read whole or not at all
                return pair
        return None  # nobody accepts: the client sees the connection closed, and retries

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            pair = await backend()
            if pair is None:
                return
            up_reader, up_writer = pair
            copies = [
                asyncio.ensure_future(copy(reader, up_writer)),
                asyncio.ensure_future(copy(up_reader, writer)),
            ]
            try:  # either side closing ends the pair (a process shutting down, a client gone)
                await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in copies:
                    task.cancel()
                await asyncio.gather(*copies, return_exceptions=True)
                up_writer.close()
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", port, backlog=4096)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


class Rollout:
    """``sockets`` and ``streams`` (by name), each in its room (``rooms``, by name; ``room``
    for the others), kept connected through a front."""

    def __init__(
        self,
        sockets: dict[str, Client],
        streams: dict[str, SseClient],
        *,
        room: str,
        heartbeat: float,
        retry: float,
        rooms: dict[str, str] | None = None,
    ) -> None:
        self.conns: dict[str, Client | SseClient] = {**sockets, **streams}
        self.room_of = {name: (rooms or {}).get(name, room) for name in self.conns}
        self.heartbeat, self.retry = heartbeat, retry
        self.back = {name: asyncio.Event() for name in self.conns}
        self.ended: dict[str, list[float]] = {name: [] for name in self.conns}
        self.tasks = [
            asyncio.ensure_future(self._keep_socket(n, c)) for n, c in sockets.items()
        ] + [asyncio.ensure_future(self._keep_stream(n, s)) for n, s in streams.items()]

    async def _keep_socket(self, name: str, client: Client) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await client.closed.wait()
            self.ended[name].append(loop.time())
            self.back[name].clear()
            while True:
                try:
                    await client.connect(timeout=10)
                    break
                except Exception:  # nobody accepted yet: again, as presence.js backs off
                    await asyncio.sleep(0.1)
            client.beat(self.heartbeat)
            await client.join(self.room_of[name], timeout=30)
            self.back[name].set()

    async def _keep_stream(self, name: str, stream: SseClient) -> None:
        loop = asyncio.get_running_loop()
        while True:
            assert stream.task is not None
            await asyncio.shield(stream.task)
            self.ended[name].append(loop.time())
            self.back[name].clear()
            await asyncio.sleep(self.retry)
            while True:
                try:
                    await stream.connect(timeout=10, resume=True)
                    break
                except Exception:
                    await asyncio.sleep(0.1)
            assert stream.hello["resumed"] is True
            await stream.wait_for("presence.state", timeout=30, room=self.room_of[name])  # resumed
            self.back[name].set()

    def connected(self, name: str) -> bool:
        conn = self.conns[name]
        if isinstance(conn, Client):
            return conn.open
        return conn.task is not None and not conn.task.done()

    def unsettled(self) -> list[str]:
        """The connections not open, or not back in the room since they ended."""
        return [
            n
            for n in self.conns
            if not (self.connected(n) and (not self.ended[n] or self.back[n].is_set()))
        ]

    async def restart(self, server: AsgiServer, timeout: float) -> dict[str, Any]:
        """SIGTERM to ``server``, then its start again (the same port); waits (``timeout`` at
        most) until every connection is open and back in the room. The seconds it took to
        stop, and until everybody was back, from the SIGTERM."""
        loop = asyncio.get_running_loop()
        told = loop.time()
        code = await asyncio.to_thread(server.stop, timeout)
        stopped = loop.time() - told
        await asyncio.to_thread(server.start)
        while self.unsettled():
            if loop.time() - told > timeout:
                raise AssertionError(f"not back within {timeout} s: {self.unsettled()[:10]}")
            await asyncio.sleep(0.05)
        moved = [n for n in self.conns if self.ended[n] and self.ended[n][-1] >= told]
        return {
            "code": code,
            "stopped_s": stopped,
            "back_s": loop.time() - told,
            "moved": len(moved),
            "moved_streams": sum(isinstance(self.conns[n], SseClient) for n in moved),
            "graceful_exceeded": "timeout graceful shutdown exceeded" in server.log(None),
        }

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


if (
    __name__ == "__main__"
):  # Front.start(): python -m tests.reliability.rolling COUNTS PORT BACKEND...
    asyncio.run(serve(Path(sys.argv[1]), int(sys.argv[2]), [int(p) for p in sys.argv[3:]]))
