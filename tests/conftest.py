import os
import threading
import time
import uuid

import pytest
import redis
from django.conf import settings

from presence_app.core.connection import reset_stores
from presence_app.store import Store, StoreConfig
from presence_app.testing import RedisClusterServer


@pytest.fixture
def redis_client(presence_redis_url):
    """A client of the test Redis (the plugin's session server), emptied before each test."""
    client = redis.Redis.from_url(presence_redis_url)
    client.flushall()
    reset_stores()
    yield client
    client.close()


@pytest.fixture(scope="session")
def redis_cluster():
    """A local 3-master Redis Cluster for the whole run."""
    with RedisClusterServer(masters=3) as cluster:
        yield cluster


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.cluster)])
def backend(request):
    """The Redis client the store tests run on: a single server, then a Redis Cluster."""
    if request.param == "single":
        yield request.getfixturevalue("redis_client"), 1
        return
    cluster = request.getfixturevalue("redis_cluster")
    client = redis.RedisCluster.from_url(cluster.url)
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    yield client, 4  # several shards, so that the global sets spread over the nodes
    client.close()


@pytest.fixture
def make_store(backend):
    """Stores on the current backend: make_store(**StoreConfig fields)."""
    client, shards = backend

    def make(**config):
        return Store(client, StoreConfig(**{"shards": shards, **config}))

    return make


@pytest.fixture
def store(make_store):
    """A store with the default timers; tests pass `now` to move time."""
    return make_store()


def all_keys(client) -> list[str]:
    """Every key, from every node of a cluster."""
    if isinstance(client, redis.RedisCluster):
        keys = client.keys(target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        keys = client.keys("*")
    return sorted(k.decode() if isinstance(k, bytes) else k for k in keys)


# -- Django integration: middleware, tags, admin, API, commands ---------------------------------
class RedisCalls:
    """The commands clients send to the real test Redis (seen through MONITOR), so tests can hold
    code to a round-trip budget: a store call is one pipeline, so on one shard "commands sent"
    is "round trips made".

    Left out: commands run inside Lua scripts, connection set-up (HELLO, CLIENT, SELECT), the
    channel layer's traffic (``asgi`` keys) and this class' own markers.
    """

    SETUP = {"hello", "client", "select", "auth", "echo", "info", "config", "monitor", "ping"}

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = redis.Redis.from_url(url)
        self.monitor = self.client.monitor().__enter__()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        try:
            while True:
                command = self.monitor.next_command()
                if command and command["client_type"] != "lua":
                    self.seen.append(command["command"])
        except (redis.RedisError, OSError, AttributeError, ValueError):
            return  # closed

    def _sync(self) -> None:
        """Waits until MONITOR has shown everything sent before now."""
        marker = f"sync-{uuid.uuid4().hex}"
        self.client.echo(marker)
        deadline = time.monotonic() + 5
        while not any(marker in c for c in self.seen):
            assert time.monotonic() < deadline, "MONITOR fell behind"
            time.sleep(0.002)

    def reset(self) -> None:
        self._sync()
        self.seen.clear()

    @property
    def commands(self) -> list[str]:
        self._sync()
        return [
            c
            for c in self.seen
            if c.split(" ", 1)[0].lower() not in self.SETUP
            and not any(arg.startswith("asgi") for arg in c.split(" ")[1:])
        ]

    def by_command(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.commands:
            name = c.split(" ", 1)[0].lower()
            out[name] = out.get(name, 0) + 1
        return out

    @property
    def total(self) -> int:
        return len(self.commands)

    def close(self) -> None:
        self.monitor.__exit__()
        self.client.close()


@pytest.fixture
def redis_calls(redis_client):
    """Counts the commands sent to the test Redis from now on (the store's connection and
    scripts are warmed up first, so connecting does not count)."""
    from presence_app.core.connection import get_store
    from presence_app.store import scripts

    for script in scripts.load().values():
        redis_client.script_load(script.source)
    get_store().get_many(["warm-up"])
    calls = RedisCalls(settings.REDIS_URL)
    calls.reset()
    yield calls
    calls.close()


@pytest.fixture(autouse=True)
def _presence_breaker():
    """Every test starts with Redis presumed reachable (the fail-open breaker is per process)."""
    from presence_app.failopen import breaker

    breaker.reset()
    yield
    breaker.reset()


@pytest.fixture(autouse=True)
def _threads_done_with_the_database():
    """A task cancelled at a test's end leaves its ``sync_to_async`` call running in its thread
    (an offline's ``LastSeen`` write, say): wait for it, or the database teardown that follows
    meets its lock ("database table is locked"). Autouse fixtures of conftest tear down before
    pytest-django's."""
    yield
    from asgiref.sync import SyncToAsync

    SyncToAsync.single_thread_executor.submit(lambda: None).result(timeout=30)


@pytest.fixture(autouse=True)
def _touches_by_hand():
    """The middleware's touches wait for ``batcher.flush()`` in this process, so that tests see
    them at a moment they choose (servers the tests start flush in the background)."""
    from presence_app.jobs.touches import batcher

    batcher.background = False
    batcher.pending.clear()
    yield batcher
    batcher.pending.clear()


@pytest.fixture
def redis_down():
    """PRESENCE pointed at a private Redis that was up and has been stopped."""
    from django.test import override_settings

    from presence_app.core.connection import get_store
    from presence_app.testing import RedisServer

    server = RedisServer().start()
    with override_settings(PRESENCE={**settings.PRESENCE, "REDIS_URL": server.url}):
        get_store().ping()
        server.stop()
        yield server


# -- parallel runs: pytest-xdist ---------------------------------------------------------------
def pytest_configure(config):
    # Each worker starts a private Redis of its own (presence_app.testing.ensure_redis_url); one
    # Redis named by hand in REDIS_URL would be shared, and the workers would empty it (FLUSHALL)
    # under each other's tests. tests/settings.py has run by now: the marker says who started it.
    xdist = config.pluginmanager.has_plugin("xdist")
    if (
        xdist
        and config.getoption("numprocesses", None)
        and "PRESENCE_PRIVATE_REDIS_FOR" not in os.environ
    ):
        raise pytest.UsageError(
            "REDIS_URL names a Redis the test workers would share (and empty under each "
            "other): run the tests without -n (serially), or unset REDIS_URL"
        )


# -- long variants: `pytest --run-slow` ----------------------------------------------------------
def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the long variants (tests marked slow)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="a long variant: run it with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
