"""A TCP proxy on loopback that delays what clients send by a settable latency, in its own
process: ``python -m tests.ha.latency_proxy LISTEN_PORT TARGET_PORT DELAY_SECONDS``. SIGUSR1
turns the delay on, SIGUSR2 off (it starts off). Each chunk is held ``DELAY`` seconds, in order,
so pipelined requests each take the latency, not the sum (a slow network or a busy Redis)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

DELAY = {"on": False, "seconds": 0.0}


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delayed: bool) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def write() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    writing = asyncio.ensure_future(write())
    try:
        while data := await reader.read(65536):
            hold = DELAY["seconds"] if delayed and DELAY["on"] else 0.0
            queue.put_nowait((time.monotonic() + hold, data))
    except OSError:
        pass
    finally:
        queue.put_nowait((0.0, b""))
        try:
            await writing
        except OSError:
            pass
        writer.close()


async def main(listen: int, target: int, delay: float) -> None:
    DELAY["seconds"] = delay
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: DELAY.update(on=True))
    loop.add_signal_handler(signal.SIGUSR2, lambda: DELAY.update(on=False))
    # Ended by the test: at once, without cancelling every open pump (nothing to keep).
    loop.add_signal_handler(signal.SIGTERM, lambda: os._exit(0))

    async def serve(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pump(client_reader, server_writer, True), pump(server_reader, client_writer, False)
        )

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
