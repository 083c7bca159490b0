"""pytest fixtures for projects that use presence_app: a private Redis, a clean state, a fake clock.

Installed with the app and loaded by pytest on its own (the ``pytest11`` entry point); nothing
runs until a test asks for a fixture, so projects that never do pay nothing::

    def test_profile_shows_online(client, presence, django_user_model):
        user = django_user_model.objects.create_user("ann")
        presence.touch(user.pk)
        assert b"presence-online" in client.get(f"/people/{user.pk}/").content

- ``presence_redis_url`` (session): a private ``redis-server`` on a free loopback port for the
  whole run, or the Redis ``REDIS_URL`` names if it is set.
- ``presence``: the API (``presence_app.presence``) on that Redis, with ``PRESENCE`` pointed at
  it and every presence key deleted before the test.
- ``presence_touches``: the middleware's batch of touches; ``flush()`` writes the requests'
  touches now (with the ``presence`` fixture they wait for it instead of a background thread).
- ``presence_channel_layer``: ``CHANNEL_LAYERS`` on that Redis too (channels-redis' pub/sub
  layer), for consumer tests with Channels' ``WebsocketCommunicator``.
- ``presence_clock``: fake time. Store calls made without ``now`` (from views, middleware,
  consumers, the API) read ``presence_clock.now``; ``advance(seconds)`` moves it.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Iterator
from functools import wraps
from types import ModuleType
from typing import Any

import pytest


@pytest.fixture(scope="session")
def presence_redis_url() -> Iterator[str]:
    """The URL of the session's Redis: ``REDIS_URL`` if set, else a private server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    from presence_app.testing import RedisServer

    with RedisServer() as server:
        # In the environment, so that servers a test starts (uvicorn, daphne) share it.
        os.environ["REDIS_URL"] = server.url
        try:
            yield server.url
        finally:
            os.environ.pop("REDIS_URL", None)


@pytest.fixture
def presence(presence_redis_url: str) -> Iterator[ModuleType]:
    """``presence_app.presence`` on the session's Redis, emptied of presence keys first."""
    from django.conf import settings
    from django.test import override_settings

    from presence_app import presence as api
    from presence_app.core.connection import get_store
    from presence_app.failopen import breaker
    from presence_app.jobs.touches import batcher

    configured = getattr(settings, "PRESENCE", None) or {}
    with override_settings(
        PRESENCE={**configured, "REDIS_URL": presence_redis_url, "CLUSTER": False}
    ):
        get_store().clear()  # the app's keys only: a shared REDIS_URL keeps everything else
        breaker.reset()  # Redis presumed reachable, whatever an earlier test did
        # Requests' touches wait for presence_touches.flush(): written when the test says so.
        background, batcher.background = batcher.background, False
        batcher.pending.clear()
        yield api
        batcher.background = background
        batcher.pending.clear()
        breaker.reset()


@pytest.fixture
def presence_touches(presence: ModuleType) -> Any:
    """The process's batch of touches (PresenceMiddleware queues a request's touch there):
    ``presence_touches.flush()`` writes it, as the background thread would within a second."""
    from presence_app.jobs.touches import batcher

    return batcher


@pytest.fixture
def presence_channel_layer(presence: ModuleType, presence_redis_url: str) -> Iterator[Any]:
    """``CHANNEL_LAYERS`` on the session's Redis (the pub/sub layer); yields the layer."""
    from channels.layers import get_channel_layer
    from django.test import override_settings

    layers = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": presence_redis_url, "socket_timeout": None}]},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):
        yield get_channel_layer()


class PresenceClock:
    """The time presence is computed on during a test (unix seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def set(self, now: float) -> None:
        self.now = now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def _pinned(method: Any, clock: PresenceClock) -> Any:
    """``method`` with ``now`` filled from ``clock`` when the caller leaves it out."""
    signature = inspect.signature(method)

    def bind(args: tuple, kwargs: dict) -> inspect.BoundArguments:
        bound = signature.bind(*args, **kwargs)
        if bound.arguments.get("now") is None:
            bound.arguments["now"] = clock.now
        return bound

    if inspect.iscoroutinefunction(method):

        @wraps(method)
        async def pinned_async(*args: Any, **kwargs: Any) -> Any:
            bound = bind(args, kwargs)
            return await method(*bound.args, **bound.kwargs)

        return pinned_async

    @wraps(method)
    def pinned(*args: Any, **kwargs: Any) -> Any:
        bound = bind(args, kwargs)
        return method(*bound.args, **bound.kwargs)

    return pinned


@pytest.fixture
def presence_clock(monkeypatch: pytest.MonkeyPatch) -> PresenceClock:
    """Fake time for presence: starts at the real time; ``advance()`` and ``set()`` move it.

    Every public store method that takes ``now`` gets the clock's time when called without one,
    so timers (idle, leases, the disconnect grace) pass at once instead of in real seconds. Only
    presence's own clock moves: Django's, and Redis' key expiry, do not.
    """
    from presence_app.store import AsyncStore, BaseStore, Store

    clock = PresenceClock(float(int(time.time())))
    # The methods each face defines, and the shared ones (the front door's reads plan them).
    for cls in (BaseStore, Store, AsyncStore):
        for name, method in list(vars(cls).items()):
            if (
                inspect.isfunction(method)
                and not name.startswith("_")
                and "now" in inspect.signature(method).parameters
            ):
                monkeypatch.setattr(cls, name, _pinned(method, clock))
    return clock
