"""A rolling deploy, for tests/reliability/test_rolling_deploy.py and bench/rolling.py.

:class:`Front`: one address in front of several ASGI processes, as a load balancer's: a TCP proxy on a free loopback port that hands each new connection to the next process that
accepts it (round robin; a process that is down is skipped), then copies bytes both ways until
either side closes (then closes both). WebSockets, SSE streams and REST calls all go through it unchanged.

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
from collections import Counter
from typing import Any

from presence_app.testing import free_port
from tests.servers import AsgiServer
from tests.sse_client import SseClient

from .clients import Client


class Front:
    def __init__(self, backends: list[Any]) -> None:
        self.backends = backends
        self.port = free_port()
        self.next = 0
        self.served: Counter[str] = Counter()
        self.server: asyncio.AbstractServer | None = None
        self.pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return self.url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/presence/"

    async def start(self) -> Front:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.pipes):
            task.cancel()
        await asyncio.gather(*self.pipes, return_exceptions=True)

    async def _backend(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for _ in range(len(self.backends)):
            backend = self.backends[self.next % len(self.backends)]
            self.next += 1
            try:
                pair = await asyncio.open_connection("127.0.0.1", backend.port)
            except OSError:
                continue  # down (restarting): the next one
            self.served[backend.name] += 1
            return pair
        return None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.pipes.add(task)
        try:
            await self._serve(reader, writer)
        except asyncio.CancelledError:
            pass  # stop(): a task of start_server's must not end cancelled (asyncio logs it)
        finally:
            writer.close()
            self.pipes.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pair = await self._backend()
        if pair is None:
            return  # nobody accepts: the client sees the connection closed, and retries
        up_reader, up_writer = pair
        copies = [
            asyncio.ensure_future(self._copy(reader, up_writer)),
            asyncio.ensure_future(self._copy(up_reader, writer)),
        ]
        try:  # either side closing ends the pair (a process shutting down, a client gone)
            await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for copy in copies:
                copy.cancel()
            await asyncio.gather(*copies, return_exceptions=True)
            up_writer.close()

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()


class Rollout:
    """``sockets`` and ``streams`` (by name), all in ``room``, kept connected through a front."""

    def __init__(
        self,
        sockets: dict[str, Client],
        streams: dict[str, SseClient],
        *,
        room: str,
        heartbeat: float,
        retry: float,
    ) -> None:
        self.conns: dict[str, Client | SseClient] = {**sockets, **streams}
        self.room, self.heartbeat, self.retry = room, heartbeat, retry
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
            await client.join(self.room, timeout=30)
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
            await stream.wait_for("presence.state", timeout=30, room=self.room)  # resumed
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
