"""Fixtures of the high-availability tests: the reliability suite's (tests/reliability/conftest.py:
a migrated database copied per test, ASGI servers stopped at the end, ``eventually``) on the
topologies a production Redis has: a primary with a replica under three sentinels, and a Redis
Cluster whose masters have replicas."""

# ruff: noqa: F811 - fixtures imported from the reliability suite, asked for by name

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from presence_app.testing import RedisClusterServer, RedisSentinelGroup
from tests.reliability.conftest import (  # noqa: F401 - fixtures and the report hook
    Servers,
    prefix,
    pytest_runtest_makereport,
    redis_server,
    template_db,
)
from tests.servers import Database

SERVICE = "presence"


@pytest.fixture
def sentinel_group() -> Iterator[RedisSentinelGroup]:
    """A primary, a replica and three sentinels; the primary is down 1 s before a failover."""
    with RedisSentinelGroup(service=SERVICE) as group:
        yield group


@pytest.fixture
def replicated_cluster() -> Iterator[RedisClusterServer]:
    """Three masters with one replica each; a master silent for 1 s is replaced."""
    with RedisClusterServer(masters=3, replicas=1, node_timeout=1000) as cluster:
        yield cluster


def _db(template_db: Database, tmp_path: Path, prefix: str, env: dict[str, str]) -> Database:
    copy = template_db.copy(tmp_path / "db.sqlite3")
    copy.settings = "tests.ha.settings"
    copy.extra_env.update({"PRESENCE_KEY_PREFIX": prefix, **env})
    return copy


@pytest.fixture
def sentinel_db(
    template_db: Database, tmp_path: Path, prefix: str, sentinel_group: RedisSentinelGroup
) -> Database:
    return _db(
        template_db,
        tmp_path,
        prefix,
        {"HA_SENTINELS": json.dumps(sentinel_group.sentinels), "HA_SERVICE": SERVICE},
    )


@pytest.fixture
def cluster_db(
    template_db: Database, tmp_path: Path, prefix: str, replicated_cluster: RedisClusterServer
) -> Database:
    return _db(template_db, tmp_path, prefix, {"HA_CLUSTER": json.dumps(replicated_cluster.urls)})


@pytest.fixture
def db(template_db: Database, redis_server, prefix: str, tmp_path: Path) -> Database:
    """A plain single Redis (the reliability suite's), for the memory and load tests."""
    return _db(template_db, tmp_path, prefix, {"REDIS_URL": redis_server.url})


@pytest.fixture
def servers_on(request: pytest.FixtureRequest) -> Iterator[Callable[[Database], Servers]]:
    """``servers_on(db)``: ASGI servers on ``db`` (stopped at the end; logs of a failed test)."""
    made: list[Servers] = []

    def make(db: Database) -> Servers:
        made.append(Servers(db))
        return made[-1]

    yield make
    for helper in made:
        helper.stop_all()
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        for helper in made:
            for server in helper.started:
                print(f"--- {server.name} ({server.kind}, port {server.port}) log, tail ---")
                print(server.log(8000))
