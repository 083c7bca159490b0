"""LastSeen: written on offline transitions and by the bulk flush, never per request."""

import time
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from presence_app import presence
from presence_app.core import dispatch
from presence_app.jobs import lastseen
from presence_app.jobs.touches import batcher
from presence_app.models import LastSeen

from ..users import create_user, login_name, names

pytestmark = pytest.mark.django_db

T = 1_800_000_000.0


def at(ts):
    return datetime.fromtimestamp(ts, tz=UTC)


@pytest.fixture
def users(django_user_model):
    return [create_user(name) for name in ("ann", "ben", "cy", "di")]


def test_the_offline_transition_writes_last_seen(redis_client, users):
    ann = users[0]
    dispatch.publish(presence.touch(ann.pk, now=T))
    assert not LastSeen.objects.exists()  # coming online writes nothing
    dispatch.publish(presence.sweep(now=T + 61))
    row = LastSeen.objects.get(user=ann)
    assert row.last_seen_at == at(T)
    # An offline transition keeps the device the flush stored.
    LastSeen.objects.filter(pk=row.pk).update(device="phone")
    dispatch.publish(presence.touch(ann.pk, now=T + 100))
    dispatch.publish(presence.sweep(now=T + 200))
    row.refresh_from_db()
    assert (row.last_seen_at, row.device) == (at(T + 100), "phone")


def test_disconnect_after_the_grace_writes_last_seen(redis_client, users):
    ben = users[1]
    dispatch.publish(presence.connect("c1", ben.pk, now=T))
    assert presence.heartbeat("c1", ben.pk, now=T + 30)
    dispatch.publish(presence.disconnect("c1", ben.pk, now=T + 40))
    dispatch.publish(presence.sweep(now=T + 45))
    assert not LastSeen.objects.exists()  # still within the grace
    dispatch.publish(presence.sweep(now=T + 61))
    assert LastSeen.objects.get(user=ben).last_seen_at == at(T + 40)


def test_going_invisible_writes_the_frozen_public_last_seen(redis_client, users):
    cy = users[2]
    presence.touch(cy.pk, now=T)
    dispatch.publish(presence.set_status(cy.pk, "invisible", now=T + 10))
    assert LastSeen.objects.get(user=cy).last_seen_at == at(T + 10)
    # Still invisibly online: the flush does not move the public last seen.
    presence.touch(cy.pk, now=T + 20)
    assert lastseen.flush(now=T + 20) == 0
    assert LastSeen.objects.get(user=cy).last_seen_at == at(T + 10)


def test_flush_upserts_every_online_user_in_pages(redis_client, users):
    now = time.time()
    for user in users[:3]:
        presence.touch(user.pk, now=now)
    presence.connect("phone-1", users[0].pk, now=now, device="phone")
    presence.touch("no-such-user", now=now)  # known to Redis, not to the database: skipped
    LastSeen.objects.create(user=users[1], last_seen_at=at(T - 3600), device="old")
    with CaptureQueriesContext(connection) as queries:
        assert lastseen.flush(batch=2, now=now) == 3
    assert len(queries) == 4  # two pages: which ids are users, then one upsert each
    rows = {row.user.get_username(): row for row in LastSeen.objects.select_related("user")}
    assert sorted(rows) == names("ann", "ben", "cy")
    assert all(row.last_seen_at == at(now) for row in rows.values())
    assert rows[login_name("ann")].device == "phone"
    assert LastSeen.objects.count() == 3  # updated in place, not duplicated


def test_requests_do_not_write_last_seen(client, redis_client, users):
    client.force_login(users[0])
    for _ in range(10):
        client.get("/admin/login/")
    batcher.flush()
    assert presence.get(users[0].pk).state == "online"
    assert not LastSeen.objects.exists()
