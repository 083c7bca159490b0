"""The JSON API under abuse, through the real views on the real test Redis: request rates
limited per user and per client IP (429 with Retry-After), oversized ``ids=`` lists refused
with a 400 before any parsing, Redis call or query, and a full list served in one round trip."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from presence_app import presence
from presence_app.jobs.touches import batcher
from presence_app.web import ratelimit

pytestmark = pytest.mark.django_db

LIMITS = {"API_USER_RATE": 0.5, "API_USER_BURST": 5, "API_IP_RATE": 0.05, "API_IP_BURST": 12}


class Clock:
    """The buckets' clock, moved by the test alone: no bucket refills in the middle of a burst
    however slow the machine, and an interval passes without waiting for it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    for buckets in (ratelimit.users, ratelimit.ips):
        monkeypatch.setattr(buckets, "clock", clock)
    return clock


@pytest.fixture
def limits(clock):
    with override_settings(PRESENCE={**settings.PRESENCE, **LIMITS}):
        yield


@pytest.fixture
def people(django_user_model, redis_client):
    return [django_user_model.objects.create_user(f"abuser{i}") for i in range(4)]


def statuses(client, path, n, ip="10.0.0.1"):
    return [client.get(path, REMOTE_ADDR=ip) for _ in range(n)]


def test_a_user_past_the_burst_gets_429_with_retry_after(client, people, limits, clock):
    client.force_login(people[0])
    replies = statuses(client, "/presence/api/online/", 8)
    assert [r.status_code for r in replies] == [200] * 5 + [429] * 3
    refused = replies[-1]
    assert int(refused["Retry-After"]) >= 1 and "Try again in" in refused.json()["detail"]
    # The same user from another address is still limited (per user), another user is not.
    assert client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.2").status_code == 429
    client.force_login(people[1])
    assert client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.2").status_code == 200
    # The bucket refills at API_USER_RATE: not a moment before one token's time, then at once.
    client.force_login(people[0])
    clock.now += 1 / LIMITS["API_USER_RATE"] - 0.1
    assert client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.3").status_code == 429
    clock.now += 0.2
    assert client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.4").status_code == 200


def test_an_address_past_its_burst_gets_429_whoever_asks(client, people, limits):
    """Many accounts (or none) from one address share its bucket."""
    codes = []
    for user in people:  # 4 users x 4 requests: each under its own burst of 5
        client.force_login(user)
        codes += [r.status_code for r in statuses(client, "/presence/api/rooms/lobby/", 4)]
    assert codes.count(200) == LIMITS["API_IP_BURST"] and codes[-4:] == [429] * 4
    client.logout()
    anonymous = client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.1")
    assert anonymous.status_code == 429 and anonymous["Retry-After"]
    assert client.get("/presence/api/online/", REMOTE_ADDR="10.0.0.9").status_code == 401


@pytest.mark.parametrize(
    "query",
    [
        "ids=" + ",".join(str(i) for i in range(10_000)),  # 10,000 ids (~49 kB)
        "ids=" + "9" * (1024 * 1024),  # a 1 MB id
        "ids=" + ",".join(str(i) for i in range(600)),  # past MAX_WATCHED_USERS (500)
        "&".join(f"id={i}" for i in range(600)),
        "ids=" + "%2C".join(str(i) for i in range(600)),
    ],
)
def test_oversized_id_lists_are_refused_before_any_work(client, people, redis_calls, query):
    client.force_login(people[0])
    client.get("/presence/api/users/?ids=1")  # the middleware's touch of people[0] ...
    batcher.flush()  # ... written by the process's batch
    redis_calls.reset()
    with CaptureQueriesContext(connection) as queries:
        start = time.perf_counter()
        response = client.get("/presence/api/users/?" + query)
        took = time.perf_counter() - start
    assert response.status_code == 400
    assert any(w in response.json()["detail"] for w in ("may name at most", "too long"))
    assert redis_calls.total == 0
    # Only the session and the user (the auth middleware), nothing per id.
    assert len(queries) <= 2, [q["sql"] for q in queries]
    print(f"{len(query)} bytes refused in {took * 1000:.1f} ms")


def test_a_full_list_is_one_round_trip_and_no_query_per_id(client, people, redis_calls):
    for i in range(0, 500, 7):
        presence.connect(f"c{i}", i)
    client.force_login(people[0])
    client.get("/presence/api/users/?ids=1")  # the middleware's touch of people[0] ...
    batcher.flush()  # ... written by the process's batch
    ids = ",".join(str(i) for i in range(500))
    redis_calls.reset()
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/presence/api/users/?ids={ids}")
    assert response.status_code == 200
    users = response.json()["users"]
    online = {u["user"] for u in users if u["state"] == "online"}
    assert len(users) == 500 and online == {str(i) for i in [*range(0, 500, 7), people[0].pk]}
    assert redis_calls.by_command() == {"evalsha": 1}
    assert len(queries) <= 2, [q["sql"] for q in queries]


def test_limits_are_checked_settings():
    from django.core.checks import run_checks

    with override_settings(PRESENCE={**settings.PRESENCE, "API_USER_RATE": 0}):
        assert "presence_app.E001" in {m.id for m in run_checks()}
