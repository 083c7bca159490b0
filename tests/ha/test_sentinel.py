"""Redis under Sentinel (a primary, a replica, three sentinels: Debian's redis-sentinel): the
app finds the primary through the sentinels (PRESENCE["SENTINELS"], channels-redis' sentinel
hosts, django-redis' SentinelClient). The primary is killed (SIGKILL) with sockets connected and
heartbeats flowing: pages keep serving, no socket is dropped, every lease is renewed on the
promoted replica within a heartbeat interval of the promotion, no leave flickers to observers,
no ghost, no last seen lost."""

from __future__ import annotations

import asyncio

import pytest
import redis
from django.test import override_settings
from redis.sentinel import Sentinel

from .conftest import SERVICE
from .failover import OVERRIDES, run_failover

pytestmark = pytest.mark.timeout(180)

USERS = 40


async def test_primary_killed_under_load_heals_on_the_promoted_replica(
    sentinel_group, sentinel_db, servers_on, prefix
):
    from tests.reliability.conftest import servers_store, store_config

    first_primary = sentinel_group.primary
    manager = Sentinel(sentinel_group.sentinels, sentinel_kwargs={"socket_timeout": 1})
    client = manager.master_for(SERVICE, socket_timeout=2, socket_connect_timeout=1)

    def promoted() -> bool:
        address = sentinel_group.master_address()
        return address is not None and address[1] != first_primary.port

    def replicated() -> None:
        with first_primary.client() as primary:
            assert primary.execute_command("WAIT", 1, 5000) == 1

    outcome = await run_failover(
        servers_on(sentinel_db),
        sentinel_db,
        USERS,
        reader=lambda: servers_store(client, store_config(prefix, **OVERRIDES)),
        kill=first_primary.kill,
        promoted=promoted,
        replicated=replicated,
    )
    client.close()
    outcome.check("sentinel")


async def test_stores_follow_the_primary_through_django_redis_sentinel_settings(sentinel_group):
    """The sync store on django-redis' SentinelClient connection, the async one on redis-py's
    asyncio Sentinel from the cache's SENTINELS option; both reach the new primary."""
    from presence_app.core.connection import aclose_async_store, get_async_store, get_store

    url = f"redis://{SERVICE}/0"
    caches = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.SentinelClient",
                "SENTINELS": sentinel_group.sentinels,
            },
        }
    }
    from django.conf import settings

    presence = {k: v for k, v in settings.PRESENCE.items() if k != "REDIS_URL"}
    with override_settings(
        CACHES=caches,
        PRESENCE=presence,
        DJANGO_REDIS_CONNECTION_FACTORY="django_redis.pool.SentinelConnectionFactory",
    ):
        from django_redis import get_redis_connection

        assert get_store().client is get_redis_connection("default")  # shared, not a copy
        get_store().connect("c1", "u1")
        assert await get_async_store().online() == ["u1"]
        with sentinel_group.primary.client() as primary:
            assert primary.execute_command("WAIT", 1, 5000) == 1  # the replica has it
        sentinel_group.primary.kill()
        replica = sentinel_group.replicas[0]

        def moved() -> bool:
            found = sentinel_group.master_address()
            return found is not None and found[1] == replica.port

        from tests.reliability.conftest import eventually

        await eventually(moved, 30, "the replica promoted")
        await eventually(lambda: get_store().online() == ["u1"], 10, "the sync store")
        for _ in range(100):  # the async pool drops its dead connections as it meets them
            try:
                assert await get_async_store().online() == ["u1"]
                break
            except redis.ConnectionError:
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the async store did not reach the new primary")
        with replica.client() as direct:
            assert direct.info("replication")["role"] == "master"
        await aclose_async_store()
