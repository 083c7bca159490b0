"""Room flavours on the real channels-redis layer and Redis.

- Permanent: membership by a call or a frame (a row, an admin); every connection of a member
  joins the room unasked on opening, and joins at once when the membership is added while it is
  open; the member list (API, template tag) has offline members with their last seen, in one
  query and one Redis round trip; CAN_JOIN still decides at every join.
- Ephemeral: the first join creates the room, the last member's leave removes it.
- Reactive: the member list is the live presence set, status included.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.template import Context, Template
from django.test import RequestFactory

from presence_app import presence, rooms
from presence_app.models import LastSeen, RoomMembership

from .users import create_user, login_name, names
from .ws import Socket, make_user, presence_settings, shutdown


def refuse_secret(user, room):
    return not room.startswith("secret")


#: The interleaving the outage test met under load, forced: the unasked join of a permanent
#: room waits here (after the hello) until the test has taken Redis away.
HOLD: dict[str, asyncio.Event] = {}


async def hold_permanent_join(user, room):
    if room == "general" and HOLD:
        HOLD["entered"].set()
        await HOLD["release"].wait()
    return True


# -- permanent ----------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_member_s_every_connection_joins_unasked(redis_client):
    channel_layers.backends.clear()
    with presence_settings(CAN_JOIN="tests.test_rooms.refuse_secret", PERMANENT_ROOMS=True):
        alice, cookie = await make_user("alice")
        assert await sync_to_async(rooms.add_member)(alice, "general") is True
        assert await sync_to_async(rooms.add_member)(alice, "general") is False  # once
        await sync_to_async(RoomMembership.objects.create)(user=alice, room="secret-plans")
        tab = await Socket.open(cookie, name="alice")
        tab.beat()  # a slow machine must not lose the lease mid-test
        state = await tab.wait_for("presence.state", room="general")  # nobody asked
        assert [m["user"] for m in state["members"]] == [str(alice.pk)]
        # CAN_JOIN still decides: the membership of a room she may not enter is not honoured.
        refused = await tab.wait_for("error", room="secret-plans")
        assert refused["code"] == "forbidden"
        assert await presence.aroom_members("secret-plans") == []

        # A membership added while she is connected: the open socket joins now.
        await rooms.aadd_member(alice, "design")
        await tab.wait_for("presence.state", room="design")
        # A permanent join by frame: a row; a permanent leave ends it (and leaves).
        await tab.send(type="join", room="standup", permanent=True)
        await tab.wait_for("presence.state", room="standup")
        assert sorted(await sync_to_async(rooms.member_rooms)(alice)) == [
            "design",
            "general",
            "secret-plans",
            "standup",
        ]
        await tab.send(type="leave", room="standup", permanent=True)
        await tab.wait_for("presence.leave", room="standup", user=str(alice.pk))
        assert "standup" not in await sync_to_async(rooms.member_rooms)(alice)
        await tab.close()

        # A second device joins the same rooms by itself too.
        other = await Socket.open(cookie, name="alice-2")
        await other.wait_all(
            ("presence.state", {"room": "general"}), ("presence.state", {"room": "design"})
        )
        await other.close()
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
async def test_a_permanent_join_cut_short_by_an_outage_is_made_when_redis_is_back(redis_client):
    """Redis goes away between a connection's hello and its unasked join of a permanent room:
    the join is refused ("unavailable"). The browser never asked for that room, so it will not
    ask again (presence.js retries only its own joins): the connection itself joins it when
    Redis answers again (its next heartbeat), and the browser gets the room's state."""
    channel_layers.backends.clear()
    with presence_settings(CAN_JOIN="tests.test_rooms.hold_permanent_join", PERMANENT_ROOMS=True):
        alice, cookie = await make_user("alice")
        await sync_to_async(rooms.add_member)(alice, "general")
        HOLD.update(entered=asyncio.Event(), release=asyncio.Event())
        try:
            opening = asyncio.ensure_future(Socket.open(cookie, name="alice"))
            await asyncio.wait_for(HOLD["entered"].wait(), 10)  # hello sent, join under way
            with presence_settings(
                CAN_JOIN="tests.test_rooms.hold_permanent_join",
                PERMANENT_ROOMS=True,
                REDIS_URL="redis://127.0.0.1:1/0",  # the store's Redis is away
            ):
                HOLD["release"].set()
                tab = await opening
                refused = await tab.wait_for("error", timeout=10, room="general")
                assert refused["code"] == "unavailable"
        finally:
            HOLD.clear()
        assert await presence.aroom_members("general") == []
        # Redis is back: the next heartbeat makes the join the outage cut short.
        tab.beat()
        state = await tab.wait_for("presence.state", timeout=10, room="general")
        assert [m["user"] for m in state["members"]] == [str(alice.pk)]
        assert await presence.aroom_members("general") == [str(alice.pk)]
        await tab.close()
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
def test_member_list_has_offline_members_with_last_seen(
    redis_client, redis_calls, django_assert_num_queries, client
):
    ann, ben, cat = (create_user(n) for n in ("ann", "ben", "cat"))
    for user in (ann, ben, cat):
        rooms.add_member(user, "general")
    seen = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    LastSeen.objects.create(user=ben, last_seen_at=seen)  # ben: offline, Redis forgot him
    presence.connect("ann-1", ann)
    presence.join("general", "ann-1", ann)  # ann: online; cat: never seen

    redis_calls.reset()
    with django_assert_num_queries(1):
        members = rooms.members("general", viewer=ann)
    assert redis_calls.total == 1
    assert [(m.user.get_username(), m.presence.state, m.last_seen) for m in members] == [
        (login_name("ann"), "online", members[0].presence.last_seen_at),
        (login_name("ben"), "offline", seen),
        (login_name("cat"), "offline", None),
    ]
    assert members[0].last_seen is not None

    client.force_login(cat)
    body = client.get("/presence/api/rooms/general/members/").json()
    assert body["count"] == 3
    assert [(m["username"], m["state"], m["last_seen_at"]) for m in body["members"][1:]] == [
        (login_name("ben"), "offline", seen.isoformat()),
        (login_name("cat"), "offline", None),
    ]
    assert (
        body["members"][0]["username"] == login_name("ann") and body["members"][0]["last_seen_at"]
    )
    # The live set of the same room holds ann alone: the roster is the permanent story.
    assert presence.room_members("general") == [str(ann.pk)]

    request = RequestFactory().get("/")
    request.user = cat
    html = Template(
        "{% load presence %}{% room_roster 'general' as ms %}"
        "{% for m in ms %}{{ m.user.get_username }}:{{ m.presence.state }};{% endfor %}"
    ).render(Context({"request": request}))
    assert html == "{}:online;{}:offline;{}:offline;".format(*names("ann", "ben", "cat"))


# -- ephemeral and reactive ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_an_ephemeral_room_lives_from_first_join_to_last_leave(redis_client):
    ann, ben = create_user("ann"), create_user("ben")
    assert ("doc-7", 1) not in presence.rooms()
    presence.connect("a", ann)
    presence.connect("b", ben)
    presence.join("doc-7", "a", ann)  # created by the first join
    assert ("doc-7", 1) in presence.rooms()
    presence.join("doc-7", "b", ben)
    presence.leave("doc-7", "a", ann)
    assert ("doc-7", 1) in presence.rooms()
    presence.leave("doc-7", "b", ben)  # gone with the last member
    assert [r for r, _ in presence.rooms()] == []
    assert presence.room_count("doc-7") == 0


@pytest.mark.django_db(transaction=True)
async def test_a_reactive_room_is_its_viewers_live_presence(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        ann, ann_cookie = await make_user("ann")
        ben, ben_cookie = await make_user("ben")
        a = await Socket.open(ann_cookie, name="ann")
        b = await Socket.open(ben_cookie, name="ben")
        a.beat()
        await a.send(type="join", room="page-9")
        await a.wait_for("presence.state", room="page-9")
        await b.send(type="join", room="page-9")
        await a.wait_for("presence.join", room="page-9", user=str(ben.pk))
        assert await presence.aroom_members("page-9") == [str(ann.pk), str(ben.pk)]
        await b.send(type="status", state="dnd")
        await a.wait_for("presence.update", user=str(ben.pk), state="dnd")
        await b.close()  # the viewer goes: after the grace the set is ann again
        await a.wait_for("presence.leave", timeout=5, room="page-9", user=str(ben.pk))
        assert await presence.aroom_members("page-9") == [str(ann.pk)]
        await a.close()
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
def test_memberships_in_the_admin(admin_client, django_user_model, redis_client):
    ann = create_user("ann")
    rooms.add_member(ann, "general")
    page = admin_client.get("/admin/presence_app/roommembership/")
    assert page.status_code == 200
    assert b"general" in page.content and b"ann" in page.content
    add = admin_client.post(
        "/admin/presence_app/roommembership/add/", {"user": ann.pk, "room": "design"}
    )
    assert add.status_code == 302, add.content[:2000]
    assert sorted(rooms.member_rooms(ann)) == ["design", "general"]
    bad = admin_client.post(
        "/admin/presence_app/roommembership/add/", {"user": ann.pk, "room": "bad name!"}
    )
    assert bad.status_code == 200
    assert b"The room name does not match the allowed pattern." in bad.content
