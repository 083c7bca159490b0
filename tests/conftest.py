import pytest
import redis
from django.conf import settings

from presence_app.connection import reset_stores
from presence_app.store import Store, StoreConfig
from presence_app.testing import RedisClusterServer


@pytest.fixture
def redis_client():
    """A client of the test Redis (single server), emptied before each test."""
    client = redis.Redis.from_url(settings.REDIS_URL)
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
