"""Fixtures of the reliability tests: real processes only. Each test gets a private
redis-server (it may be stopped and restarted), a copy of one migrated SQLite file, and ASGI
servers (tests/servers.py) that are stopped when it ends; a failed test prints their logs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings

from presence_app.store import Store, StoreConfig
from presence_app.testing import RedisServer
from tests.servers import AsgiServer, Database

from .settings import TIMERS


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Database:
    """One migrated database for the run (copied per test: cheaper than migrating again),
    after the system checks passed on the reliability settings (the short timers included)."""

    db = Database(
        tmp_path_factory.mktemp("reliability") / "template.sqlite3",
        env={"REDIS_URL": settings.REDIS_URL},
    ).migrate()
    db.manage("check", "--fail-level", "WARNING")
    return db


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A private redis-server: the test may stop it and start it again (empty)."""
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    return f"rel-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def db(template_db: Database, redis_server: RedisServer, prefix: str, tmp_path: Path) -> Database:
    copy = template_db.copy(tmp_path / "db.sqlite3")
    copy.extra_env.update({"REDIS_URL": redis_server.url, "PRESENCE_KEY_PREFIX": prefix})
    return copy


@pytest.fixture
def timers() -> dict[str, float]:
    """The test's own timers, over TIMERS (settings.py): none. A module whose servers need
    others (``settings.LOADED``) overrides this fixture; the ``servers`` it starts run with
    them (PRESENCE_OVERRIDES) and the ``store`` fixture reads with them."""
    return {}


class Servers:
    """Starts ASGI servers on the test's database; all are stopped at the end of the test.
    ``timers`` go to every server's PRESENCE_OVERRIDES, under the overrides a start names."""

    def __init__(self, db: Database, timers: dict[str, float] | None = None) -> None:
        self.db = db
        self.timers = dict(timers or {})
        self.started: list[AsgiServer] = []

    def start(self, name: str = "server", **kwargs: Any) -> AsgiServer:
        if self.timers:
            env = dict(kwargs.get("env") or {})
            named = json.loads(env.get("PRESENCE_OVERRIDES") or "{}")
            env["PRESENCE_OVERRIDES"] = json.dumps({**self.timers, **named})
            kwargs["env"] = env
        server = AsgiServer(self.db, name=name, **kwargs)
        self.started.append(server)
        return server.start()

    async def astart(self, name: str = "server", **kwargs: Any) -> AsgiServer:
        """start() off the event loop, so that connected clients keep running meanwhile."""
        return await asyncio.to_thread(self.start, name, **kwargs)

    def stop_all(self) -> None:
        for server in self.started:
            server.stop()


@pytest.fixture
def servers(
    request: pytest.FixtureRequest, db: Database, timers: dict[str, float]
) -> Iterator[Servers]:
    helper = Servers(db, timers)
    yield helper
    helper.stop_all()
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for server in helper.started:
            print(f"--- {server.name} ({server.kind}, port {server.port}) log, tail ---")
            print(server.log(8000))


def store_config(prefix: str, **overrides: Any) -> StoreConfig:
    """The store as the servers see it (the same prefix and timers)."""
    values = {**TIMERS, **{k.upper(): v for k, v in overrides.items()}}
    return StoreConfig(
        prefix=prefix,
        lease_ttl=values["LEASE_TTL"],
        disconnect_grace=values["DISCONNECT_GRACE"],
        online_window=values["ONLINE_WINDOW"],
        **({"metadata_ttl": values["METADATA_TTL"]} if "METADATA_TTL" in values else {}),
    )


def servers_store(client: Any, config: StoreConfig) -> Store:
    """A store reading what the servers wrote."""
    return Store(client, config)


@pytest.fixture
def store(redis_server: RedisServer, prefix: str, timers: dict[str, float]) -> Iterator[Store]:
    """A store on the test's Redis and prefix, for reading what the servers did (with their
    timers: a read counts a user online for a lease after their last heartbeat)."""
    client = redis.Redis.from_url(redis_server.url, socket_timeout=5)
    yield servers_store(client, store_config(prefix, **timers))
    client.close()


async def eventually(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    interval: float = 0.05,
    detail: Callable[[], Any] | None = None,
) -> float:
    """Waits until ``check()`` (run in a thread: it may call Redis) is truthy; returns the
    seconds it took. Fails with the last value (or ``detail()``) when ``timeout`` passes."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        try:
            value = await asyncio.to_thread(check)
        except redis.RedisError as exc:
            value = exc
        if value and not isinstance(value, Exception):
            return loop.time() - start
        if loop.time() - start > timeout:
            if detail is not None:
                value = await asyncio.to_thread(detail)
            raise AssertionError(f"{what}: not within {timeout}s (last: {value!r})")
        await asyncio.sleep(interval)
