import pytest
import redis
from django.conf import settings

from presence_app.connection import reset_stores
from presence_app.store import Store, StoreConfig


@pytest.fixture
def redis_client():
    """A client of the test Redis, emptied before each test."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushall()
    reset_stores()
    yield client
    client.close()


@pytest.fixture
def store(redis_client):
    """A store with round default timers; tests pass `now` to move time."""
    return Store(redis_client, StoreConfig())
