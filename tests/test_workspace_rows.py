"""Issue 41: the workspace is part of every row. Two workspaces, "acme" and "globex", and a user
active in both: no row of one is read, revoked, forgotten or left behind in the other.

Each test failed on 47aebdf (one LastSeen row per user across workspaces, memberships without a
workspace, a deletion forgotten in the current workspace only, the privacy row kept by forget
and left out of export). Real Redis, real channel layer, real sockets and requests; the
workspace is named by ``?ws=`` (``tests.core.test_tenants.tenant_of``).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.conf import settings
from django.test import Client, override_settings

from presence_app import presence, rooms, tenants
from presence_app.jobs import sweeper
from presence_app.models import LastSeen, LastSeenPrivacy, RoomMembership

from .frame_waits import CLOSED
from .test_erasure import keys_naming
from .users import create_user
from .ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

TENANT = "tests.core.test_tenants.tenant_of"
WORKSPACES = ("acme", "globex")


def in_workspaces(**more):
    return override_settings(PRESENCE={**settings.PRESENCE, "TENANT": TENANT, **more})


def seen_then_gone(user, workspace: str, seconds_ago: float) -> None:
    """``user`` was active in ``workspace`` ``seconds_ago`` and went offline since: the sweep's
    offline transition wrote their LastSeen row there."""
    now = time.time()
    with tenants.activate(workspace):
        presence.touch(user, now=now - seconds_ago)
        presence.sweep(now=now)
        assert presence.get(user, viewer=presence.TRUSTED).state == "offline"


def seen_text(html: str, user) -> str:
    """The "last seen" text of ``user``'s entry in a demo room page."""
    entry = html.split(f'data-user="{user.pk}"', 1)[1].split("</li>", 1)[0]
    found = re.search(r"data-seen>(.*?)</span>\s*$", entry, re.S)
    text = re.sub(r"<[^>]+>", "", found.group(1)) if found else entry
    return " ".join(text.split())  # "10&nbsp;minutes": one space


# -- LastSeen ---------------------------------------------------------------------------------
def test_a_page_shows_the_last_seen_of_its_own_workspace(redis_client):
    """globex's page showed "last seen 10 minutes ago" from acme's activity: one LastSeen row
    per user, read by every workspace once Redis had nothing of the user there."""
    ann, bob = create_user("ann"), create_user("bob")
    seen_then_gone(ann, "acme", 600)
    client = Client()
    client.force_login(bob)
    with in_workspaces():
        acme = client.get("/rooms/lobby/?ws=acme").content.decode()
        globex = client.get("/rooms/lobby/?ws=globex").content.decode()
        assert "10 minutes ago" in seen_text(acme, ann)
        assert seen_text(globex, ann) == "not seen yet"
        # Seen in globex two hours ago too: each workspace keeps its own.
        seen_then_gone(ann, "globex", 7200)
        for workspace, text in (("globex", "2 hours ago"), ("acme", "10 minutes ago")):
            page = client.get(f"/rooms/lobby/?ws={workspace}").content.decode()
            assert text in seen_text(page, ann), workspace
    # The rows themselves: one per workspace, each read in its own.
    for workspace, ago in (("acme", 600), ("globex", 7200)):
        with tenants.activate(workspace):
            row = LastSeen.objects.get(user=ann)
            assert abs(row.last_seen_at.timestamp() - (time.time() - ago)) < 120
    assert not LastSeen.objects.filter(user=ann).exists()  # the default space: never seen


def test_the_flush_writes_each_last_seen_into_its_workspace(redis_client):
    """The sweeper's flush of acme and of globex wrote the same row: the last flushed won."""
    ann = create_user("ann")
    for workspace, device in (("acme", "phone"), ("globex", "laptop")):
        with tenants.activate(workspace):
            presence.connect(f"ann-{device}", ann, device=device)
    sweeper.sweep_once(force=True)  # sweeps, and flushes, each workspace inside it
    for workspace, device in (("acme", "phone"), ("globex", "laptop")):
        with tenants.activate(workspace):
            assert LastSeen.objects.get(user=ann).device == device, workspace
    assert not LastSeen.objects.filter(user=ann).exists()  # nothing of the default space's
    # ``presence flush`` (sweeper.flush_all) too: each workspace's row in it.
    with tenants.activate("acme"):
        LastSeen.objects.all().delete()
    assert sweeper.flush_all() == 2
    with tenants.activate("acme"):
        assert LastSeen.objects.get(user=ann).device == "phone"


# -- RoomMembership ---------------------------------------------------------------------------
def test_a_membership_is_of_one_workspace(redis_client):
    """An acme membership listed the user in globex's roster of the room of the same name, and
    a permanent leave in globex ended the acme membership."""
    ann, bob = create_user("ann"), create_user("bob")
    with tenants.activate("acme"):
        assert rooms.add_member(ann, "general") is True
    client = Client()
    client.force_login(bob)
    with in_workspaces():
        acme = client.get("/presence/api/rooms/general/members/?ws=acme").json()
        globex = client.get("/presence/api/rooms/general/members/?ws=globex").json()
    assert [m["user"] for m in acme["members"]] == [str(ann.pk)] and acme["count"] == 1
    assert globex["members"] == [] and globex["count"] == 0
    with tenants.activate("globex"):
        assert rooms.member_rooms(ann) == [] and rooms.members("general") == []
        assert rooms.remove_member(ann, "general") is False  # nothing of globex's to end
        assert rooms.add_member(ann, "general") is True  # globex's own, beside acme's
    with tenants.activate("acme"):
        assert rooms.member_rooms(ann) == ["general"]
        assert rooms.remove_member(ann, "general") is True
    with tenants.activate("globex"):
        assert rooms.member_rooms(ann) == ["general"]  # acme's leave ended acme's only


def test_a_roster_shows_each_member_s_last_seen_of_its_own_workspace(redis_client):
    """A roster reads each member's LastSeen row beside their membership: the row of the
    membership's workspace, never another's (Redis emptied: the rows are all there is)."""
    ann = create_user("ann")
    for workspace, ago in (("acme", 600), ("globex", 7200)):
        seen_then_gone(ann, workspace, ago)
        with tenants.activate(workspace):
            assert rooms.add_member(ann, "general") is True
    redis_client.flushall()
    for workspace, ago in (("acme", 600), ("globex", 7200)):
        with tenants.activate(workspace):
            (member,) = rooms.members("general", viewer=presence.TRUSTED)
            assert abs(member.last_seen.timestamp() - (time.time() - ago)) < 120, workspace


async def test_a_socket_joins_the_permanent_rooms_of_its_own_workspace_only(redis_client):
    """ann, a member of acme's #general: her globex socket joined globex's #general unasked."""
    channel_layers.backends.clear()
    try:
        with presence_settings(TENANT=TENANT, PERMANENT_ROOMS=True):
            ann, cookie = await make_user("ann")
            with tenants.activate("acme"):
                await rooms.aadd_member(ann, "general")
            sock = await Socket.open(cookie, path="/ws/presence/?ws=globex", name="ann@globex")
            sock.beat()
            # Frames are handled after the connection's own joins: once this one is answered,
            # an unasked join of #general would have been made.
            await sock.send(type="join", room="elsewhere")
            await sock.wait_for("presence.state", timeout=10, room="elsewhere")
            with tenants.activate("globex"):
                assert await presence.aroom_members("general", viewer=presence.TRUSTED) == []
                assert await presence.aroom_members("elsewhere", viewer=presence.TRUSTED) == [
                    str(ann.pk)
                ]
            with tenants.activate("acme"):
                assert await presence.aroom_members("general", viewer=presence.TRUSTED) == []
            await sock.close()
    finally:
        await shutdown()
        channel_layers.backends.clear()


async def test_a_socket_joins_the_permanent_rooms_of_its_workspace(redis_client):
    channel_layers.backends.clear()
    try:
        with presence_settings(TENANT=TENANT, PERMANENT_ROOMS=True):
            ann, cookie = await make_user("ann")
            with tenants.activate("acme"):
                await rooms.aadd_member(ann, "general")
            sock = await Socket.open(cookie, path="/ws/presence/?ws=acme", name="ann@acme")
            sock.beat()
            await sock.wait_for("presence.state", timeout=10, room="general")
            await sock.close()
    finally:
        await shutdown()
        channel_layers.backends.clear()


# -- erasure and export -----------------------------------------------------------------------
async def test_deleting_a_user_forgets_them_in_every_workspace(redis_client):
    """A deleted user was forgotten in the current workspace only: acme's and globex's Redis
    kept them (online, in rooms, with a last seen) and their sockets there stayed open."""
    channel_layers.backends.clear()
    try:
        with presence_settings(TENANT=TENANT):
            ann, cookie = await make_user("ann")
            uid = str(ann.pk)
            sockets = []
            for workspace in WORKSPACES:
                path = f"/ws/presence/?ws={workspace}"
                sock = await Socket.open(cookie, path=path, name=workspace)
                sock.beat()
                await sock.send(type="join", room="general")
                await sock.wait_for("presence.state", timeout=10, room="general")
                sockets.append(sock)
            with tenants.activate("globex"):  # a privacy choice, made in globex only
                await presence.aset_privacy(ann, "nobody")
            assert keys_naming(redis_client, uid)

            await sync_to_async(ann.delete)()
            for sock in sockets:
                assert (await sock.wait_for(CLOSED, timeout=10))["code"] == 4401
            assert keys_naming(redis_client, uid) == []
            for workspace in WORKSPACES:
                with tenants.activate(workspace):
                    assert await presence.aroom_members("general", viewer=presence.TRUSTED) == []
                    assert (await presence.aget(uid, viewer=presence.TRUSTED)).last_seen is None
    finally:
        await shutdown()
        channel_layers.backends.clear()


def active_in_both(ann) -> None:
    """ann: seen in acme, where she hides her last seen and belongs to #general; connected in
    globex on her phone, where she shows it to her audience."""
    seen_then_gone(ann, "acme", 600)
    with tenants.activate("acme"):
        presence.set_privacy(ann, "nobody", approximate=True)
        rooms.add_member(ann, "general")
    with tenants.activate("globex"):
        presence.connect("ann-1", ann, device="phone")
        presence.set_privacy(ann, "audience")


def test_forget_erases_every_row_of_every_workspace(redis_client):
    """``forget`` kept the LastSeenPrivacy row, and erased the current workspace only."""
    ann = create_user("ann")
    active_in_both(ann)
    with tenants.activate("acme"):  # erased from one workspace's request: every one
        presence.forget(ann)
    for workspace in (None, *WORKSPACES):
        with tenants.activate(workspace):
            for model in (LastSeenPrivacy, LastSeen, RoomMembership):
                assert not model.objects.filter(user=ann).exists(), (workspace, model)
            assert presence.get_privacy(ann) == presence.privacy.DEFAULT
    assert keys_naming(redis_client, str(ann.pk)) == []


def test_export_shows_every_row_of_every_workspace(redis_client):
    """``export`` left the privacy choice out, and showed the current workspace only."""
    ann = create_user("ann")
    uid = str(ann.pk)
    active_in_both(ann)
    exported = presence.export(ann)  # from the default space: every workspace is in it
    text = json.dumps(exported)  # JSON-ready
    assert '"nobody"' in text and '"audience"' in text and '"ann-1"' in text
    assert exported["user"] == uid and sorted(exported["workspaces"]) == ["acme", "globex"]
    acme, globex = exported["workspaces"]["acme"], exported["workspaces"]["globex"]
    assert acme["privacy"] == {"last_seen": "nobody", "approximate": True}
    assert [m["room"] for m in acme["permanent_rooms"]] == ["general"]
    assert acme["last_seen"] is not None and acme["connections"] == []
    assert globex["privacy"] == {"last_seen": "audience", "approximate": False}
    assert globex["connections"] == ["ann-1"] and globex["last_seen"] is None
    presence.forget(ann)
    assert presence.export(ann) == {"user": uid, "workspaces": {}}


def test_a_privacy_choice_is_of_one_workspace(redis_client):
    ann = create_user("ann")
    with tenants.activate("acme"):
        presence.set_privacy(ann, "nobody")
    with tenants.activate("globex"):
        assert presence.get_privacy(ann) == presence.privacy.DEFAULT
        presence.set_privacy(ann, "audience", approximate=True)
    with tenants.activate("acme"):
        assert presence.get_privacy(ann).visible_to == "nobody"
