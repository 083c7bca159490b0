"""The right to erasure: ``presence.forget(user)`` (and deleting a Django user) removes every key
and row of that user, announces them offline and ends their connections; ``manage.py presence
export USER`` prints what is stored about one user. On the real Redis and channel layer."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from presence_app import presence, rooms
from presence_app.core.connection import get_store
from presence_app.models import LastSeen, RoomMembership

from .frame_waits import CLOSED
from .users import create_user, login_name
from .ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


def keys_naming(client, uid: str) -> list[str]:
    """Every key in Redis that names ``uid``: by its name's last part, or by a member of a set
    or sorted set, or a field of a hash (a user's, or a ``user|conn`` one). Exact matches: a
    key named by something else (a process id, say) may contain the id's digits."""

    def names(item: bytes) -> bool:
        return item.decode().split("|")[0] == uid

    found = []
    for key in client.scan_iter("*"):
        name, kind = key.decode(), client.type(key)
        if name.split(":")[-1] == uid:
            found.append(name)
        elif kind == b"zset" and any(names(m) for m in client.zrange(key, 0, -1)):
            found.append(name)
        elif kind == b"set" and any(names(m) for m in client.smembers(key)):
            found.append(name)
        elif kind == b"hash" and any(names(f) for f in client.hkeys(key)):
            found.append(name)
    return found


@pytest.mark.parametrize("how", ["forget", "delete the user"])
async def test_a_forgotten_user_leaves_nothing_behind(redis_client, how):
    with presence_settings(PERMANENT_ROOMS=True):
        try:
            (_, alice), (bob, cookie) = await make_user("alice"), await make_user("bob")
            await sync_to_async(rooms.add_member)(bob, "team")
            watcher, sock = await Socket.open(alice, name="a"), await Socket.open(cookie, name="b")
            uid = str(bob.pk)
            await watcher.send(type="watch", users=[uid])
            await watcher.wait_for("presence.state", watch=True)
            await watcher.send(type="join", room="team")
            await watcher.wait_for("presence.state", room="team")
            await sock.wait_for("presence.state", room="team")  # joined by itself
            # a room state of a connection no session cleans up after (as another process's
            # would be): the erasure's own deletion is what removes it
            await presence.aconnect("c-other", bob)
            await presence.ajoin("team", "c-other", bob)
            await presence.apublish_room_states({"team": [(uid, "p-other", "c-other", "{}")]})
            await sync_to_async(presence.set_status)(bob, "dnd", message="hi", mood="x")
            await sync_to_async(LastSeen.objects.update_or_create)(
                user=bob, defaults={"last_seen_at": "2026-01-01T00:00Z"}
            )
            assert any(":rs:" in key for key in keys_naming(redis_client, uid))

            if how == "forget":
                await presence.aforget(bob)
            else:
                await sync_to_async(bob.delete)()
            await watcher.wait_for("presence.leave", room="team", user=uid)
            await watcher.wait_for("presence.update", state="offline", user=uid)
            assert (await sock.wait_for(CLOSED))["code"] == 4401  # for good: no reconnect
            assert await presence.aroom_members("team") == [watcher.user]  # the others stay
            assert keys_naming(redis_client, uid) == []
            assert not await sync_to_async(LastSeen.objects.filter(user_id=bob.pk).exists)()
            assert not await sync_to_async(RoomMembership.objects.filter(user_id=bob.pk).exists)()
            assert (await presence.aget(uid, viewer=presence.TRUSTED)).last_seen is None
            await watcher.close()
        finally:
            await shutdown()


def test_export_prints_what_is_stored_about_one_user(redis_client, django_user_model):
    ann = create_user("ann")
    presence.connect("ann-1", ann, device="phone")
    presence.join("lobby", "ann-1", ann)
    presence.set_status(ann, "dnd", message="Focus")
    rooms.add_member(ann, "team")
    LastSeen.objects.create(user=ann, last_seen_at="2026-01-01T00:00Z", device="phone")
    out = StringIO()
    call_command("presence", "export", login_name("ann"), stdout=out)  # the login
    data = json.loads(out.getvalue())
    assert data["user"] == str(ann.pk)
    assert list(data["workspaces"]) == [""]  # a site without workspaces: the default space
    held = data["workspaces"][""]
    assert held["record"]["st"] == "dnd" and held["record"]["msg"] == "Focus"
    assert held["connections"] == ["ann-1"] and "seen" in held["indexes"]
    assert held["last_seen"]["device"] == "phone"
    assert [m["room"] for m in held["permanent_rooms"]] == ["team"]
    assert held["privacy"] is None  # no choice made
    presence.forget(ann)
    assert presence.export(ann) == {"user": str(ann.pk), "workspaces": {}}
    assert get_store().online() == []


def test_a_request_that_deletes_its_own_user_does_not_write_them_back(redis_client):
    """The view deletes the signed-in user (erasure runs as the deletion commits); the
    middleware's touch of that request, and a heartbeat or status still on its way, are written
    after it: none of them brings the user back, and no key names them."""
    from django.http import HttpResponse
    from django.test import RequestFactory

    from presence_app.jobs.touches import batcher
    from presence_app.middleware import PresenceMiddleware

    user = create_user("gone")
    uid = str(user.pk)
    presence.connect("gone-1", uid)
    presence.touch(uid)

    def delete_me(request):
        type(user).objects.filter(pk=user.pk).delete()  # request.user keeps its pk
        return HttpResponse("bye")

    request = RequestFactory().get("/account/delete/")
    request.user = user
    assert PresenceMiddleware(delete_me)(request).status_code == 200
    batcher.flush()  # the request's touch, after the forget
    presence.set_status(uid, "dnd", message="late")  # a status on its way
    assert presence.heartbeat("gone-1", uid) is False  # a socket not closed yet: nothing held
    presence.connect("gone-1", uid)
    assert presence.get(uid, viewer=presence.TRUSTED).state == "offline"
    assert keys_naming(redis_client, uid) == []
    assert not LastSeen.all_workspaces.filter(user_id=user.pk).exists()
