"""Who may see what, by construction: the findings of the review of 89165fe, one test each.

Each ran against a private Redis with a policy that hides everybody from one user (ann sees bob
only) and from signed-out visitors (they see nobody), and each failed on 89165fe:

1. ``{% room_roster %}`` for a signed-out visitor showed hidden users online with their message;
2. the room roster fell back to the LastSeen row of a hidden user, which the flush writes while
   they are online ("last seen 2 minutes ago" says "online");
3. going invisible with a message sent the message out in the offline event;
4. an invisible user's metadata reached other viewers (``Presence.meta``);
6. with Redis away, the LastSeen fallback ignored the policy;
7. unbounded work for one caller (permanent rooms, deep pages of the online list, the roster).

Finding 5 (access re-checked on a resume, a recovery and a revocation) runs on real servers:
tests/reliability/test_revoke.py.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.template import Context, Template
from django.test import RequestFactory, override_settings

from presence_app import presence, rooms
from presence_app.jobs import lastseen
from presence_app.models import LastSeen
from presence_app.store import InvalidInput

from ..users import create_user
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

#: Who sees whom: ann sees bob; signed-out visitors (None) see nobody.
RELATION: dict[str | None, set[str]] = {}
CALLS: list[list[str]] = []


def policy(viewer, user_ids):
    CALLS.append(list(user_ids))
    return [u for u in user_ids if u in RELATION.get(viewer, set())]


def with_policy(**more):
    return override_settings(
        PRESENCE={**settings.PRESENCE, "AUDIENCE": "tests.access.test_visibility.policy", **more}
    )


def render(source, viewer, **context):
    request = RequestFactory().get("/")
    request.user = viewer
    return Template("{% load presence %}" + source).render(Context({"request": request, **context}))


@pytest.fixture
def team(redis_client, django_user_model):
    """ann sees bob only; bob and cat are online, dnd with a message, members of "team"."""
    RELATION.clear()
    CALLS.clear()
    ann, bob, cat = (create_user(n) for n in ("ann", "bob", "cat"))
    for user in (bob, cat):
        presence.connect(f"{user.pk}-c", user)
        presence.set_status(user, "dnd", message="busy")
        rooms.add_member(user, "team")
    RELATION[str(ann.pk)] = {str(bob.pk)}
    yield ann, bob, cat
    RELATION.clear()


ROSTER = (
    "{% room_roster 'team' as members %}"
    "{% for m in members %}[{{ m.presence.state }}:{{ m.presence.message }}:"
    "{{ m.last_seen|default:'never' }}]{% endfor %}"
)


def test_1_the_roster_tag_shows_a_signed_out_visitor_nobody_hidden(team):
    with with_policy():
        html = render(ROSTER, AnonymousUser())
    assert html == "[offline::never][offline::never]", html


def test_2_the_roster_shows_no_durable_last_seen_of_a_hidden_user(team, client):
    ann, bob, cat = team
    assert lastseen.flush() == 2  # rows written while both are online
    with with_policy():
        client.force_login(ann)
        members = client.get("/presence/api/rooms/team/members/").json()["members"]
        html = render(ROSTER, ann)
    assert [(m["state"], m["last_seen_at"] is None) for m in members] == [
        ("dnd", False),
        ("offline", True),
    ]
    assert html.endswith("[offline::never]"), html


async def test_3_going_invisible_with_a_message_sends_no_message(redis_client):
    with presence_settings():
        try:
            (_, alice), (bob, cookie) = await make_user("alice"), await make_user("bob")
            a, b = await Socket.open(alice, name="a"), await Socket.open(cookie, name="b")
            await a.send(type="watch", users=[str(bob.pk)])
            await a.wait_for("presence.state", watch=True)
            for sock in (a, b):
                await sock.send(type="join", room="lobby")
                await sock.wait_for("presence.state", room="lobby")
            await b.send(type="status", state="invisible", message="at the doctor")
            gone = await a.wait_for("presence.leave", room="lobby")
            offline = await a.wait_for("presence.update", state="offline")
            assert (gone["message"], offline["message"]) == ("", ""), (gone, offline)
            await a.close()
            await b.close()
        finally:
            await shutdown()


def test_4_an_invisible_users_metadata_reaches_nobody_else(team):
    ann, bob, cat = team
    presence.set_status(bob, "invisible", mood="hiding")
    source = "{% presence_of u as p %}{{ p.meta.mood|default:'-' }}"
    assert render(source, ann, u=bob) == "-"
    assert render(source, AnonymousUser(), u=bob) == "-"
    assert render(source, bob, u=bob) == "hiding"  # their own
    assert presence.get(bob, viewer=presence.TRUSTED).meta == {"mood": "hiding"}


def test_6_with_redis_away_the_durable_fallback_asks_the_policy(team, redis_down):
    ann, bob, cat = team
    for user in (bob, cat):
        LastSeen.objects.update_or_create(
            user=user, defaults={"last_seen_at": datetime(2026, 1, 1, tzinfo=UTC)}
        )
    source = "{% for u in users %}[{% last_seen u live=False %}]{% endfor %}"
    with with_policy():
        html = render(source, ann, users=[bob, cat])
    assert html.startswith("[last seen ") and html.endswith("[not seen yet]"), html


# -- 7: every unbounded item has a bound ---------------------------------------------------------
def test_7_permanent_rooms_per_user_are_capped(redis_client, django_user_model):
    ann = create_user("ann")
    with override_settings(PRESENCE={**settings.PRESENCE, "MAX_PERMANENT_ROOMS": 3}):
        for n in range(3):
            assert rooms.add_member(ann, f"r{n}")
        assert rooms.add_member(ann, "r0") is False  # already: no new row, no error
        with pytest.raises(InvalidInput, match="at most 3 permanent rooms"):
            rooms.add_member(ann, "r3")
    assert sorted(rooms.member_rooms(ann)) == ["r0", "r1", "r2"]


def test_7_deep_pages_are_refused_and_the_cursor_reads_on(client, redis_client, team):
    ann, bob, cat = team
    client.force_login(ann)
    assert client.get("/presence/api/online/", {"page": 1_000_000}).status_code == 400
    assert client.get("/presence/api/online/", {"per_page": 1000}).status_code == 400  # not clipped
    first = client.get("/presence/api/online/", {"per_page": 1}).json()
    assert len(first["results"]) == 1 and isinstance(first["next"], str)  # an opaque position
    second = client.get("/presence/api/online/", {"per_page": 1, "cursor": first["next"]}).json()
    assert len(second["results"]) == 1 and second["next"] is None
    assert {first["results"][0]["user"], second["results"][0]["user"]} == {
        str(bob.pk),
        str(cat.pk),
    }


def test_7_a_policy_reads_a_bounded_share_of_a_large_online_list(redis_client):
    now = time.time()
    presence.touch_many([(f"p{i}", False) for i in range(2500)], now=now)
    RELATION.clear()
    RELATION["me"] = {"p0"}  # the least recently seen is never reached
    with with_policy(AUDIENCE_SCAN_LIMIT=1000):
        CALLS.clear()
        assert presence.online_count(viewer="me", now=now) in (0, 1)
        assert sum(len(ids) for ids in CALLS) <= 1000
        ids, cursor = presence.online_page(10, viewer="me", now=now)
        assert len(CALLS) <= 2 and cursor is not None  # a page of nobody ends, to go on from
    RELATION.clear()


def test_7_the_roster_is_paged(client, team):
    ann, bob, cat = team
    client.force_login(ann)
    first = client.get("/presence/api/rooms/team/members/", {"per_page": 1}).json()
    assert (first["count"], first["num_pages"], len(first["members"])) == (2, 2, 1)
    last = client.get("/presence/api/rooms/team/members/", {"per_page": 1, "page": 2}).json()
    assert last["members"][0]["user"] == str(cat.pk)
    assert client.get("/presence/api/rooms/team/members/", {"page": 3}).status_code == 400
