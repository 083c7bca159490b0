"""PresenceMiddleware: throttled touches written in background batches (counted on the real
Redis), a request that never waits on Redis, skips, sync and async, fail open."""

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.http import HttpResponse
from django.test import AsyncRequestFactory, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext

from presence_app import failopen, presence
from presence_app.core.limits import Throttle
from presence_app.jobs.touches import batcher
from presence_app.middleware import PresenceMiddleware
from presence_app.signals import user_online

pytestmark = pytest.mark.django_db


def presence_settings(**kwargs):
    return override_settings(PRESENCE={**settings.PRESENCE, **kwargs})


def sync_middleware():
    return PresenceMiddleware(lambda request: HttpResponse("ok"))


def async_middleware():
    async def get_response(request):
        return HttpResponse("ok")

    return PresenceMiddleware(get_response)


def request_as(user, path="/chat/"):
    request = RequestFactory().get(path)
    request.user = user
    return request


def async_request_as(user, path="/chat/"):
    request = AsyncRequestFactory().get(path)

    async def auser():
        return user

    request.auser = auser
    return request


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob")


def test_one_redis_write_per_user_per_interval(redis_calls, alice, bob):
    mw = sync_middleware()
    for _ in range(5):
        assert mw(request_as(alice)).status_code == 200
    for _ in range(3):
        mw(request_as(bob))
    assert redis_calls.total == 0  # nothing on the request path
    assert batcher.pending == {str(alice.pk): True, str(bob.pk): True}
    batcher.flush()
    assert redis_calls.by_command() == {"evalsha": 1}  # both users in one script call
    assert presence.get(alice.pk).state == "online"
    assert presence.get(bob.pk).state == "online"


class Clock:
    """A clock the test alone moves: two requests fall within an interval however slow the
    machine, and an interval passes without waiting for it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_new_write_once_the_interval_has_passed(redis_calls, alice):
    with presence_settings(TOUCH_INTERVAL=1.0):
        mw = sync_middleware()
        mw.throttle.clock = clock = Clock()
        redis_calls.reset()
        mw(request_as(alice))
        batcher.flush()  # written: the next request within the interval finds no batch to join
        assert redis_calls.total == 1
        clock.now += 0.99
        mw(request_as(alice))
        batcher.flush()
        assert redis_calls.total == 1
        clock.now += 0.02  # the interval passes
        mw(request_as(alice))
        mw(request_as(alice))
        batcher.flush()
        assert redis_calls.total == 2


async def test_the_async_path_shares_the_same_throttle(redis_calls, alice, bob):
    mw = async_middleware()
    assert iscoroutinefunction(mw)
    mw.throttle.clock = Clock()  # still: the interval never passes, however slow the machine
    for _ in range(4):
        response = await mw(async_request_as(alice))
        assert response.status_code == 200
    await mw(async_request_as(bob))
    assert redis_calls.total == 0
    await sync_to_async(batcher.flush)()
    assert redis_calls.by_command() == {"evalsha": 1}
    assert (await presence.aget(alice.pk)).state == "online"
    # Written, and still within the interval: no batch of theirs to join, so nothing is due.
    redis_calls.reset()
    await mw(async_request_as(alice))
    await sync_to_async(batcher.flush)()
    assert redis_calls.total == 0


@pytest.mark.parametrize("path", ["/static/presence_app/css/presence.css", "/healthz/ready"])
def test_anonymous_users_static_and_skipped_paths_cost_nothing(redis_calls, alice, path):
    with presence_settings(SKIP_PATHS=["/healthz/"]):
        mw = sync_middleware()
        redis_calls.reset()
        mw(request_as(AnonymousUser()))
        mw(request_as(alice, path))
        batcher.flush()  # nothing was queued either: a request path never calls Redis
        assert redis_calls.total == 0
    assert presence.get(alice.pk).state == "offline"


def test_requests_through_the_stack_write_nothing_to_the_database(client, redis_client, alice):
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            assert client.get("/admin/login/").status_code == 200
        batcher.flush()
    writes = [q["sql"] for q in queries if not q["sql"].lstrip().upper().startswith("SELECT")]
    assert writes == []
    assert presence.get(alice.pk).state == "online"


def test_the_throttle_stays_bounded_and_forgets_expired_users():
    clock = [0.0]
    throttle = Throttle(10, max_keys=3, clock=lambda: clock[0])
    assert [throttle.ready(u) for u in "abcd"] == [True] * 4
    assert len(throttle) == 3  # "a", the oldest, was forgotten early
    clock[0] = 5
    assert throttle.ready("b") is False
    assert throttle.ready("a") is True
    clock[0] = 20
    assert throttle.ready("e") is True
    assert len(throttle) == 1  # everything written at 0 and 5 had expired by 20


def test_a_request_never_waits_on_redis(redis_client, alice):
    """Redis paused for writes (scripts wait): the page is served at once, and the touch lands
    when Redis answers again."""
    mw = sync_middleware()
    redis_client.execute_command("CLIENT", "PAUSE", 60_000, "WRITE")
    try:
        served = []
        request = threading.Thread(target=lambda: served.append(mw(request_as(alice))))
        request.start()
        request.join(timeout=30)
        assert served and served[0].status_code == 200, "the request waited on Redis"
        assert batcher.pending == {str(alice.pk): True}
    finally:
        redis_client.execute_command("CLIENT", "UNPAUSE")
    batcher.flush()
    assert presence.get(alice.pk).state == "online"


def test_the_background_thread_writes_the_batch(redis_client, alice):
    batcher.background = True
    sync_middleware()(request_as(alice))
    deadline = time.monotonic() + 30
    while presence.get(alice.pk).state != "online":
        assert time.monotonic() < deadline, "the batch was never written"
        time.sleep(0.05)
    assert batcher.pending == {}
    # Switched to explicit flushes (as the fixtures do), the thread ends, after any write it
    # had begun: none is left to take a later test's batch.
    thread, batcher.background = batcher._thread, False
    thread.join(30)
    assert not thread.is_alive()


def test_a_flush_waits_for_the_batch_another_thread_is_writing(redis_client, alice):
    """Every touch queued before flush() is written when it returns, also one the background
    thread took first: a flush that found the batch empty used to return while that write was
    still under way (a test or a shutdown then read what was not written yet)."""
    order, release = [], threading.Event()

    def slow_receiver(sender, user_id, **kwargs):  # runs inside the write that took the batch
        order.append("writing")
        release.wait(30)
        order.append("written")

    user_online.connect(slow_receiver)
    try:
        sync_middleware()(request_as(alice))
        writer = threading.Thread(target=batcher.flush)  # as the background thread does
        writer.start()
        deadline = time.monotonic() + 30
        while not order:
            assert time.monotonic() < deadline, "the batch was never written"
            time.sleep(0.01)
        flusher = threading.Thread(target=lambda: (batcher.flush(), order.append("flushed")))
        flusher.start()
        flusher.join(0.5)  # a flush that does not wait has returned by now
        release.set()
        flusher.join(30)
        writer.join(30)
    finally:
        release.set()
        user_online.disconnect(slow_receiver)
    assert order == ["writing", "written", "flushed"]


def test_fail_open_serves_pages_and_warns_once_per_interval(
    redis_down, caplog, alice, bob, monkeypatch
):
    caplog.set_level(logging.WARNING, logger="presence_app")
    clock = Clock()  # the breaker's: 4 requests within its interval, however slow the machine
    monkeypatch.setattr(failopen, "time", SimpleNamespace(monotonic=clock))
    with presence_settings(REDIS_URL=redis_down.url, TOUCH_INTERVAL=1.0):
        mw = sync_middleware()
        mw.throttle.clock = clock
        responses = [mw(request_as(user)) for user in (alice, bob, alice, bob)]
        assert [r.status_code for r in responses] == [200] * 4
        batcher.flush()
        assert len(caplog.records) == 1
        assert "unreachable" in caplog.records[0].getMessage()
        clock.now += 1.05  # the interval passes
        mw(request_as(bob))
        batcher.flush()
        assert len(caplog.records) == 2


async def test_fail_open_on_the_async_path(redis_down, caplog, alice):
    caplog.set_level(logging.WARNING, logger="presence_app")
    mw = async_middleware()
    assert (await mw(async_request_as(alice))).status_code == 200
    assert (await mw(async_request_as(alice))).status_code == 200
    await sync_to_async(batcher.flush)()
    assert len(caplog.records) == 1


def test_fail_open_through_the_whole_stack(redis_down, client, alice):
    client.force_login(alice)
    assert client.get("/admin/login/").status_code == 200
    assert client.get("/admin/login/").status_code == 200


@pytest.mark.parametrize(
    "method, headers, activity",
    [
        ("get", {"HTTP_SEC_FETCH_MODE": "navigate"}, True),
        ("get", {}, True),  # no fetch metadata (older browsers, scripts): counted
        ("post", {"HTTP_SEC_FETCH_MODE": "cors"}, True),  # a form or action: a person did it
        ("get", {"HTTP_SEC_FETCH_MODE": "cors"}, False),  # the page's own fetch() polling
        ("get", {"HTTP_X_REQUESTED_WITH": "XMLHttpRequest"}, False),
    ],
)
def test_background_requests_keep_users_online_but_not_active(
    redis_client, alice, method, headers, activity
):
    now = time.time()
    presence.touch(alice.pk, activity=True, now=now - 1000)  # active long ago: idle by now
    request = getattr(RequestFactory(), method)("/chat/", **headers)
    request.user = alice
    sync_middleware()(request)
    batcher.flush()
    p = presence.get(alice.pk)
    assert p.state == ("online" if activity else "idle")


def lazy_request(user, path="/chat/"):
    """An async request as AuthenticationMiddleware leaves it: ``request.user`` a lazy object,
    ``auser()`` counting its calls (each is a query and a thread hop in Django)."""
    from django.utils.functional import SimpleLazyObject

    request = AsyncRequestFactory().get(path)
    request.user = SimpleLazyObject(lambda: user)
    request.auser_calls = 0

    async def auser():
        request.auser_calls += 1
        return user

    request.auser = auser
    return request


@pytest.fixture
def carol_and_dave(django_user_model):
    return [django_user_model.objects.create_user(name) for name in ("carol", "dave")]


async def test_the_async_path_reuses_the_user_the_view_loaded(alice, bob, carol_and_dave):
    """Under ASGI a sync view loads the lazy ``request.user``; the middleware takes that one
    instead of loading the user again (``auser()``), takes the user a view logged in, and
    writes nobody for a view that logged its user out."""
    carol, dave = carol_and_dave

    def after(view_does):
        async def get_response(request):
            view_does(request)
            return HttpResponse("ok")

        return PresenceMiddleware(get_response)

    loaded = lazy_request(alice)
    await after(lambda r: r.user.pk)(loaded)  # the view read request.user
    unread = lazy_request(bob)
    await after(lambda r: None)(unread)  # the view never looked: loaded by the middleware
    logged_in = lazy_request(AnonymousUser())
    await after(lambda r: setattr(r, "user", carol))(logged_in)  # as login() does
    logged_out = lazy_request(dave)
    await after(lambda r: setattr(r, "user", AnonymousUser()))(logged_out)  # as logout()

    assert [r.auser_calls for r in (loaded, unread, logged_in, logged_out)] == [0, 1, 0, 0]
    await sync_to_async(batcher.flush)()
    states = await presence.aget_many([alice.pk, bob.pk, carol.pk, dave.pk])
    assert [states[str(u.pk)].state for u in (alice, bob, carol, dave)] == [
        "online",
        "online",
        "online",
        "offline",
    ]
