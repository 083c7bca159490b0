"""Each user's choice of who sees their last seen (everyone, their audience, nobody) and how
exactly, applied on every path by the one redaction; reciprocity as a site option; the user
themself and TRUSTED reads (the dashboard for superusers) see the truth."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.template import Context, Template
from django.test import RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext

from presence_app import presence
from presence_app.core.connection import get_store
from presence_app.models import LastSeen

from ..users import create_user
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600


def privacy_on(**more):
    return override_settings(PRESENCE={**settings.PRESENCE, "LAST_SEEN_PRIVACY": True, **more})


def render(source, viewer, **context):
    request = RequestFactory().get("/")
    request.user = viewer
    return Template("{% load presence %}" + source).render(Context({"request": request, **context}))


@pytest.fixture
def people(redis_client, django_user_model):
    """ann, bob and cat, each seen an hour ago and offline since."""
    users = [create_user(n) for n in ("ann", "bob", "cat")]
    gone = time.time() - HOUR
    for user in users:
        presence.touch(user, now=gone)
    presence.sweep()
    return users


def last_seen_of(target, viewer):
    return presence.get(target, viewer=viewer)


def test_off_by_default_and_then_no_query(people):
    ann, bob, _ = people
    presence.set_privacy(bob, "nobody")
    with CaptureQueriesContext(connection) as queries:
        seen = presence.get_many(people, viewer=ann)
    assert len(queries) == 0 and seen[str(bob.pk)].last_seen is not None


def test_nobody_hides_the_last_seen_from_everybody_but_themself(people):
    ann, bob, _ = people
    presence.set_privacy(bob, "nobody")
    with privacy_on():
        for viewer in (ann, presence.ANONYMOUS):
            p = last_seen_of(bob, viewer)
            # hidden by their choice, which the viewer reads as such: not "never seen"
            assert (p.state, p.last_seen, p.last_active, p.last_seen_approx) == (
                "offline",
                None,
                None,
                "hidden",
            )
        assert last_seen_of(bob, bob).last_seen is not None
        assert last_seen_of(bob, presence.TRUSTED).last_seen is not None
        with CaptureQueriesContext(connection) as queries:
            presence.get_many(people, viewer=ann)
        assert len(queries) == 1  # one query for the list
        assert render("{% last_seen u live=False %}", ann, u=bob) == "offline"
        assert render("{% last_seen u live=False %}", bob, u=bob) == "last seen an hour ago"
        # a never-seen account still reads "not seen yet": the mark follows the choice only
        assert render("{% last_seen u live=False %}", ann, u=create_user("dee")) == "not seen yet"


def test_a_page_of_online_users_asks_no_choice(people):
    """A choice decides only an offline user's last seen: a page of online users (a room's
    snapshot) runs no query, and one offline user among them brings the one query back."""
    ann, bob, cat = people
    presence.set_privacy(bob, "nobody")
    with privacy_on():
        for user in (ann, bob):
            presence.connect(f"c-{user.pk}", user)
        with CaptureQueriesContext(connection) as queries:
            seen = presence.get_many([ann, bob], viewer=cat, activity=True)
        assert len(queries) == 0
        assert {p.state for p in seen.values()} == {"online"}
        presence.disconnect(f"c-{bob.pk}", bob)
        presence.sweep(now=time.time() + 3600)  # bob's grace ended: offline, choice applies
        with CaptureQueriesContext(connection) as queries:
            seen = presence.get_many([ann, bob], viewer=cat, activity=True)
        assert len(queries) == 1
        assert (seen[str(bob.pk)].state, seen[str(bob.pk)].last_seen_approx) == (
            "offline",
            "hidden",
        )


def test_audience_hides_it_from_signed_out_visitors(people):
    ann, bob, _ = people
    presence.set_privacy(bob, "audience")
    with privacy_on():
        assert last_seen_of(bob, ann).last_seen is not None
        assert last_seen_of(bob, presence.ANONYMOUS).last_seen is None
        assert render("{% last_seen u live=False %}", AnonymousUser(), u=bob) == "offline"


def test_approximate_shows_a_rough_bucket_redis_and_database_alike(people, client):
    ann, bob, cat = people
    presence.set_privacy(bob, approximate=True)
    presence.set_privacy(cat, approximate=True)
    with privacy_on():
        p = last_seen_of(bob, ann)
        assert (p.last_seen, p.last_seen_approx) == (None, "recently")
        client.force_login(ann)
        users = client.get("/presence/api/users/", {"ids": f"{bob.pk},{cat.pk}"}).json()["users"]
        assert [(u["last_seen"], u["last_seen_approx"]) for u in users] == [
            (None, "recently"),
            (None, "recently"),
        ]
        # Redis forgot them: the LastSeen rows, 10 days and 200 days old, read as roughly.
        get_store().client.flushall()
        now = datetime.now(UTC)
        for user, days in ((bob, 10), (cat, 200)):
            LastSeen.objects.update_or_create(
                user=user, defaults={"last_seen_at": now - timedelta(days=days)}
            )
        html = render(
            "{% for u in us %}[{% last_seen u live=False %}]{% endfor %}", ann, us=[bob, cat]
        )
        assert html == "[last seen within a month][last seen a long time ago]"


def test_reciprocity_who_hides_theirs_sees_no_ones(people):
    ann, bob, _ = people
    presence.set_privacy(ann, "nobody")
    with privacy_on():
        assert last_seen_of(bob, ann).last_seen is not None  # not a site option yet
    with privacy_on(LAST_SEEN_RECIPROCAL=True):
        assert last_seen_of(bob, ann).last_seen is None
        assert last_seen_of(ann, ann).last_seen is not None  # their own, still
        assert last_seen_of(ann, bob).last_seen is None


def test_the_dashboard_for_superusers_sees_the_truth(people, client, admin_user):
    ann, bob, _ = people
    presence.set_privacy(bob, "nobody")
    with privacy_on():
        client.force_login(admin_user)
        page = client.get("/admin/presence_app/lastseen/dashboard/", {"q": "bob"})
        assert page.status_code == 200
        assert presence.get(bob, viewer=presence.TRUSTED).last_seen is not None


def test_the_api_reads_and_changes_ones_own_choice(people, client):
    ann, *_ = people
    client.force_login(ann)
    assert client.get("/presence/api/privacy/").json() == {
        "last_seen": "everyone",
        "approximate": False,
    }
    answer = client.post(
        "/presence/api/privacy/", json.dumps({"last_seen": "audience"}), "application/json"
    )
    assert answer.json() == {"last_seen": "audience", "approximate": False}
    bad = client.post("/presence/api/privacy/", json.dumps({"last_seen": "x"}), "application/json")
    assert bad.status_code == 400 and "everyone, audience, nobody" in bad.json()["detail"]
    assert presence.get_privacy(ann).visible_to == "audience"  # the bad one changed nothing


async def test_the_socket_sets_it_and_offline_events_keep_it(redis_client):
    with presence_settings(LAST_SEEN_PRIVACY=True):
        try:
            (_, alice), (bob, cookie) = await make_user("alice"), await make_user("bob")
            a, b = await Socket.open(alice, name="a"), await Socket.open(cookie, name="b")
            await a.send(type="watch", users=[str(bob.pk)])
            await a.wait_for("presence.state", watch=True)
            await b.send(type="privacy", last_seen="nobody")
            assert (await b.wait_for("presence.privacy"))["last_seen"] == "nobody"
            await b.send(type="privacy", last_seen="sometimes")
            assert (await b.wait_for("error"))["code"] == "invalid"
            await b.send(type="status", state="invisible")
            offline = await a.wait_for("presence.update", state="offline")
            assert offline["at"] is None  # when they were last seen is theirs to show
            await a.close()
            await b.close()
        finally:
            await shutdown()
