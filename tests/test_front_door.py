"""The front door (presence_app.presence): every entry point refuses the same rooms with the
same words, asks CAN_JOIN the same way (sync or async hook), and every change made from plain
Python reaches the browsers and the signals — on the real channels-redis layer and Redis."""

from __future__ import annotations

import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.template import Context, Template
from django.test import RequestFactory, override_settings

from presence_app import presence, signals
from presence_app.store import InvalidInput

from .users import acreate_user, create_user
from .ws import FAST, Socket, make_user, presence_settings, shutdown


def refuse_sync(user, room):
    return False


async def refuse_async(user, room):
    return False


HOOKS = ["tests.test_front_door.refuse_sync", "tests.test_front_door.refuse_async"]

#: Room names no entry point admits, and the one message each gets everywhere.
BAD_ROOMS = [
    ("lobby\n", "The room name does not match the allowed pattern."),
    ("", "A room name must be a non-empty string."),
    ("x" * 300, "A room name may be at most 100 characters long."),
    ("lobby\ud800", "The room name is not valid Unicode text."),
]


def with_presence(**overrides):
    from django.conf import settings

    return override_settings(PRESENCE={**settings.PRESENCE, **overrides})


@pytest.fixture
def someone_in_lobby(redis_client, django_user_model):
    """ann, in "lobby" on a connection opened from Python."""
    ann = create_user("ann")
    presence.connect("ann-1", ann)
    presence.join("lobby", "ann-1", ann)
    return ann


# -- CAN_JOIN: one answer on every entry point ----------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("hook", HOOKS)
def test_a_refusing_hook_closes_the_api_the_tag_and_the_dashboard(
    hook, client, admin_user, someone_in_lobby
):
    client.force_login(admin_user)
    with with_presence(CAN_JOIN=hook):
        response = client.get("/presence/api/rooms/lobby/")
        assert response.status_code == 403, response.content

        request = RequestFactory().get("/")
        request.user = admin_user
        html = Template(
            "{% load presence %}{% room_members 'lobby' as m %}[{{ m|length }}]"
        ).render(Context({"request": request}))
        assert html == "[0]"

        dashboard = client.get("/admin/presence_app/lastseen/dashboard/")
        assert dashboard.status_code == 200
        assert dashboard.context["rooms"] == []
        assert all(row.rooms == [] for row in dashboard.context["rows"])
    # Without the hook each of them shows the room.
    assert client.get("/presence/api/rooms/lobby/").json()["count"] == 1
    assert client.get("/admin/presence_app/lastseen/dashboard/").context["rooms"] == [("lobby", 1)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("hook", HOOKS)
async def test_a_refusing_hook_refuses_the_socket(hook, redis_client):
    channel_layers.backends.clear()
    with presence_settings(CAN_JOIN=hook):
        _, cookie = await make_user("alice")
        sock = await Socket.open(cookie, name="alice")
        await sock.send(type="join", room="lobby")
        error = await sock.wait_for("error")
        assert (error["code"], error["room"]) == ("forbidden", "lobby")
        assert await presence.aroom_members("lobby") == []
        await sock.close()
        await shutdown()
    channel_layers.backends.clear()


def test_can_join_awaits_an_async_hook_from_sync_code(settings):
    async def only_open(user, room):
        return room.startswith("open-")

    settings.PRESENCE = {**settings.PRESENCE, "CAN_JOIN": only_open}
    assert presence.can_join(None, "open-1") is True
    assert presence.can_join(None, "closed") is False


# -- bad room names: the same error everywhere ---------------------------------------------------
@pytest.mark.parametrize("room, message", BAD_ROOMS)
def test_python_calls_refuse_bad_rooms(redis_client, room, message):
    for call in (
        lambda: presence.join(room, "c-1", "7"),
        lambda: presence.room_members(room),
        lambda: presence.room_count(room),
        lambda: presence.can_join(None, room),
    ):
        with pytest.raises(InvalidInput, match=message):
            call()


def test_python_calls_refuse_undecodable_bytes(redis_client):
    with pytest.raises(InvalidInput, match="The room name is not valid UTF-8 text."):
        presence.room_members(b"lobby\xff")


@pytest.mark.django_db
@pytest.mark.parametrize("room, message", BAD_ROOMS)
def test_the_template_tag_refuses_bad_rooms(admin_user, room, message):
    request = RequestFactory().get("/")
    request.user = admin_user
    template = Template("{% load presence %}{% room_members room as m %}{{ m|length }}")
    with pytest.raises(InvalidInput, match=message):
        template.render(Context({"request": request, "room": room}))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path, message",
    [
        ("lobby%0A", BAD_ROOMS[0][1]),
        ("x" * 300, BAD_ROOMS[2][1]),
        ("lobby%FF", "The room name is not valid UTF-8 text."),
    ],
)
def test_the_api_refuses_bad_rooms(client, admin_user, redis_client, path, message):
    client.force_login(admin_user)
    response = client.get(f"/presence/api/rooms/{path}/")
    assert response.status_code == 400
    assert response.json()["detail"] == message


@pytest.mark.django_db(transaction=True)
async def test_the_socket_refuses_bad_rooms(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        _, cookie = await make_user("alice")
        sock = await Socket.open(cookie, name="alice")
        for room, message in BAD_ROOMS:
            await sock.send_text(f'{{"type": "join", "room": {_json_string(room)}}}')
            error = await sock.wait_for("error")
            assert (error["code"], error["detail"]) == ("invalid", message)
        await sock.close()
        await shutdown()
    channel_layers.backends.clear()


def _json_string(text: str) -> str:
    """JSON for ``text``, lone surrogates escaped as JSON allows (json.dumps would too)."""
    import json

    return json.dumps(text)


# -- plain Python reaches the browsers and fires each signal once -------------------------------
@pytest.fixture
def signal_log():
    log = []

    def make(name):
        def receiver(sender, user_id, state, **kwargs):
            log.append((name, user_id, state))

        return receiver

    receivers = {n: make(n) for n in ("user_online", "user_offline", "status_changed")}
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    yield log
    for name, receiver in receivers.items():
        getattr(signals, name).disconnect(receiver)


@pytest.mark.django_db(transaction=True)
async def test_calls_from_python_reach_a_socket_in_the_room(redis_client, signal_log):
    """A view, a shell or a task (sync code, here in a worker thread) calls the front door; the
    browser in the room hears each change as the right event, and each signal fires once."""
    channel_layers.backends.clear()
    with presence_settings():
        _, cookie = await make_user("alice")
        bob = await acreate_user("bob")
        carol = await acreate_user("carol")
        bob_id, carol_id = str(bob.pk), str(carol.pk)
        sock = await Socket.open(cookie, name="alice")
        sock.beat()  # alice's lease outlives the sweep below
        await sock.send(type="join", room="lobby")
        await sock.wait_for("presence.state", room="lobby")
        await sock.send(type="watch", users=[carol_id])
        await sock.wait_for("presence.state", watch=True)
        signal_log.clear()

        # bob on a connection of some other transport, from sync code
        await sync_to_async(presence.connect)("bob-1", bob)
        await sync_to_async(presence.join)("lobby", "bob-1", bob)
        await sock.wait_for("presence.join", room="lobby", user=bob_id)

        await sync_to_async(presence.set_status)(bob, "dnd", message="Deep work")
        update = await sock.wait_for("presence.update", user=bob_id, room=None)
        assert (update["state"], update["message"]) == ("dnd", "Deep work")

        await sync_to_async(presence.touch)(carol)  # carol's request, from a view
        assert (await sock.wait_for("presence.update", user=carol_id))["state"] == "online"

        now = time.time()
        await sync_to_async(presence.disconnect)("bob-1", bob, now=now)
        swept = await sync_to_async(presence.sweep)(now=now + FAST["DISCONNECT_GRACE"] + 0.1)
        assert {(t.kind, t.user_id) for t in swept} >= {("leave", bob_id), ("offline", bob_id)}
        await sock.wait_for("presence.leave", room="lobby", user=bob_id)

        assert signal_log.count(("user_online", bob_id, "online")) == 1
        assert signal_log.count(("status_changed", bob_id, "dnd")) == 1
        assert signal_log.count(("user_online", carol_id, "online")) == 1
        assert signal_log.count(("user_offline", bob_id, "offline")) == 1
        from presence_app.models import LastSeen

        assert await LastSeen.objects.filter(user=bob).aexists()  # the sweep's offline wrote it
        await sock.close()
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
async def test_set_status_from_python_tells_the_users_own_sockets(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        alice, cookie = await make_user("alice")
        sock = await Socket.open(cookie, name="alice")
        await sync_to_async(presence.set_status)(alice, "invisible")
        me = await sock.wait_for("presence.update", self=True)
        assert me["state"] == "invisible"
        await sock.close()
        await shutdown()
    channel_layers.backends.clear()
