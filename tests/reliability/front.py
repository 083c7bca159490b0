"""One address in front of several ASGI processes, as a load balancer does in a rolling deploy:
a TCP proxy on a free loopback port that hands each new connection to the next process that
accepts it (round robin; a process that is down is skipped), then copies bytes both ways until
either side closes (then closes both). WebSockets, SSE streams and REST calls all go through it unchanged.

    front = await Front([server_a, server_b]).start()
    Client(front, user), SseClient(front, user)   # front.port, .url, .origin, .ws_url
    front.served                                    # {server name: connections handed to it}
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

from presence_app.testing import free_port


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
