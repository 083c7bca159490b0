"""Configuration for scale-out (presence_app.core.connection, presence_app.checks):

- PRESENCE["CLUSTER"]: the stores built from settings on the local 3-master Redis Cluster, with
  the default REDIS_OPTIONS, startup nodes, an unreachable cluster failing open as a single Redis
  does, and the system checks of a cluster configuration (tests marked ``cluster``);
- the async store's connection pool on a single Redis under a burst of concurrent calls;
- the channel-layer check (W003) for each channels-redis layer."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.checks import run_checks
from django.test import override_settings

from presence_app.core.connection import (
    ASYNC_CLUSTER_MAX_CONNECTIONS,
    ASYNC_MAX_CONNECTIONS,
    CLUSTER_RETRY,
    aclose_async_store,
    get_async_store,
    get_store,
    reset_stores,
)
from presence_app.store import UNAVAILABLE
from presence_app.testing import RedisClusterServer, free_port


@pytest.fixture
def on_cluster(redis_cluster):
    """PRESENCE on the empty cluster, with the default REDIS_OPTIONS and 4 shards."""
    client = redis.RedisCluster.from_url(redis_cluster.url)
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": redis_cluster.url, "SHARDS": 4}
    ):
        yield client
    reset_stores()
    client.close()


def dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.mark.cluster
def test_sync_store_from_settings_runs_on_the_cluster(on_cluster):
    store = get_store()
    assert isinstance(store.client, redis.RedisCluster)
    for i in range(20):
        store.connect(f"c{i}", f"u{i}", now=1000)
    assert store.online_count(now=1001) == 20
    # the users are spread over the shards, and the shards over more than one node
    nodes = {on_cluster.get_node_from_key(tag).name for tag in store.keys.all_tags()}
    assert len(nodes) > 1
    keys = map(bytes.decode, on_cluster.keys("*", target_nodes=redis.RedisCluster.PRIMARIES))
    assert {k.split(":")[1].rstrip("}") for k in keys if k.startswith("{")} == {"0", "1", "2", "3"}


@pytest.mark.cluster
async def test_async_store_from_settings_takes_the_default_options(on_cluster):
    """redis.asyncio.RedisCluster has no retry_on_timeout (in REDIS_OPTIONS' defaults): the
    async store used to fail with TypeError on its first call."""
    store = get_async_store()
    try:
        await store.connect("c1", "u1")
        assert await store.online() == ["u1"]
        assert (await store.get("u1")).state == "online"
    finally:
        await aclose_async_store()


@pytest.mark.cluster
async def test_a_new_async_cluster_store_takes_calls_at_once(on_cluster):
    """A new client's first calls at once (a read is a call a shard and index)
    used to meet redis-py's lazy learning of the topology: it disconnected connections under
    their feet ("connection closed by a topology refresh"), about one new client in six here.
    The store has the client learn it first."""
    errors: list[BaseException] = []
    for _ in range(30):
        store = get_async_store()
        try:
            calls = [store.online_count() for _ in range(4)] + [store.heartbeat_many([])]
            results = await asyncio.gather(*calls, return_exceptions=True)
            errors += [r for r in results if isinstance(r, BaseException)]
        finally:
            await aclose_async_store()
    assert errors == []


@pytest.mark.cluster
def test_async_cluster_client_allows_more_than_100_connections_a_node(on_cluster):
    """redis.asyncio.RedisCluster allows 100 connections a node and raises MaxConnectionsError
    past that (it does not wait): a process whose sockets all reconnect at once would fail.
    (A burst is not asserted here: redis-py 8.1's async cluster client sometimes fails a
    connection it is opening under hundreds of concurrent first connects with an AttributeError
    of its own, with or without this cap.)"""

    async def cap():
        try:
            store = get_async_store()
            await store.ping()
            return {node.max_connections for node in store.client.get_nodes()}
        finally:
            await aclose_async_store()

    caps = asyncio.run(cap())
    assert caps == {ASYNC_CLUSTER_MAX_CONNECTIONS} and min(caps) > 100  # past redis-py's own


async def test_async_single_redis_waits_for_a_connection_instead_of_failing(redis_client):
    """redis-py 8's asyncio pool fails past 100 connections (MaxConnectionsError): the store's
    blocking pool makes the 101st call wait for a free connection instead."""
    before = redis_client.info("clients")["connected_clients"]
    store = get_async_store()
    try:
        results = await asyncio.gather(
            *(store.connect(f"c{i}", f"u{i}") for i in range(600)), return_exceptions=True
        )
        assert [r for r in results if isinstance(r, Exception)] == []
        assert await store.online_count() == 600
        opened = redis_client.info("clients")["connected_clients"] - before
        assert 1 < opened <= ASYNC_MAX_CONNECTIONS
    finally:
        await aclose_async_store()


@pytest.mark.cluster
def test_startup_nodes_any_one_reachable_is_enough(on_cluster, redis_cluster):
    urls = [dead_url(), redis_cluster.nodes[1].url, redis_cluster.nodes[2].url]
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": urls, "SHARDS": 4}
    ):
        store = get_store()
        store.connect("c1", "u1")
        assert store.online() == ["u1"]


@pytest.mark.cluster
async def test_async_startup_nodes(on_cluster, redis_cluster):
    urls = [dead_url(), redis_cluster.nodes[2].url]
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": urls, "SHARDS": 4}
    ):
        try:
            await get_async_store().connect("c1", "u1")
            assert await get_async_store().online() == ["u1"]
        finally:
            await aclose_async_store()


@pytest.mark.cluster
def test_unreachable_cluster_is_a_connection_error_sync():
    """redis-py says RedisClusterException (not a RedisError), and says it in the sync client's
    constructor: get_store() still returns a store (callers fail open around its calls), whose
    calls raise ConnectionError, until the cluster answers; then the same process is served."""
    later = RedisClusterServer(masters=1)  # its port is chosen, nothing listens there yet
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": later.url, "SHARDS": 4}
    ):
        store = get_store()
        for call in (
            store.online_count,
            store.ping,
            lambda: store.get_many(["1", "2"]),
            lambda: store.job_lock("sweep", 1).acquire(),
        ):
            with pytest.raises(redis.ConnectionError) as info:
                call()
            assert isinstance(info.value, UNAVAILABLE)
        with later:
            deadline = time.monotonic() + CLUSTER_RETRY + 5
            while True:
                try:
                    assert get_store().online_count() == 0
                    break
                except redis.ConnectionError:
                    assert time.monotonic() < deadline, "the store did not reach the cluster"
                    time.sleep(0.1)


@pytest.mark.cluster
async def test_unreachable_cluster_is_a_connection_error_async():
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": dead_url(), "SHARDS": 4}
    ):
        try:
            with pytest.raises(redis.ConnectionError):
                await get_async_store().online_count()
        finally:
            await aclose_async_store()


@pytest.mark.django_db
@pytest.mark.cluster
def test_pages_are_served_while_the_cluster_is_away(client):
    user = get_user_model().objects.create_user("alice", password="x")
    client.force_login(user)
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CLUSTER": True, "REDIS_URL": dead_url(), "SHARDS": 4}
    ):
        response = client.get("/")  # the demo's room list: presence template tags
        assert response.status_code == 200
        response = client.get("/presence/api/online/")
        assert response.status_code == 503


# -- system checks --------------------------------------------------------------------------------
def check_ids(**presence):
    with override_settings(PRESENCE={**settings.PRESENCE, **presence}):
        return sorted({m.id for m in run_checks() if m.id.startswith("presence_app.")})


@pytest.mark.cluster
def test_a_good_cluster_configuration_passes(on_cluster, redis_cluster):
    assert check_ids(CLUSTER=True, REDIS_URL=redis_cluster.url, SHARDS=4) == []


@pytest.mark.parametrize("url", ["redis://127.0.0.1:7000/3", "unix:///tmp/redis.sock"])
@pytest.mark.cluster
def test_cluster_urls_must_be_tcp_and_database_0(url):
    assert "presence_app.E008" in check_ids(CLUSTER=True, REDIS_URL=url, SHARDS=4)


def test_a_list_of_urls_needs_cluster():
    assert "presence_app.E008" in check_ids(REDIS_URL=[settings.REDIS_URL])


@pytest.mark.cluster
def test_one_shard_on_a_cluster_is_a_warning(on_cluster, redis_cluster):
    assert check_ids(CLUSTER=True, REDIS_URL=redis_cluster.url, SHARDS=1) == ["presence_app.W004"]


@pytest.mark.parametrize(
    "backend, warned",
    [
        ("channels_redis.core.RedisChannelLayer", True),
        ("channels_redis.pubsub.RedisPubSubChannelLayer", False),  # reads with short timeouts
    ],
)
def test_socket_timeout_warning_is_for_the_core_layer_only(backend, warned):
    bare = {"default": {"BACKEND": backend, "CONFIG": {"hosts": [settings.REDIS_URL]}}}
    with override_settings(CHANNEL_LAYERS=bare):
        assert ("presence_app.W003" in [m.id for m in run_checks()]) is warned


async def test_an_unreachable_cluster_reads_as_unavailable_to_a_store_of_ones_own():
    import redis.asyncio as aredis

    from presence_app.store import UNAVAILABLE, AsyncStore, StoreConfig
    from presence_app.testing import free_port

    client = aredis.RedisCluster.from_url(f"redis://127.0.0.1:{free_port()}/0")
    store = AsyncStore(client, StoreConfig(shards=4))
    with pytest.raises(UNAVAILABLE):
        await store.online_count()
