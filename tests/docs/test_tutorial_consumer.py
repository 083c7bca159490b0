"""The Channels tutorial's ``ChatConsumer`` (a plain ``AsyncWebsocketConsumer``, not the JSON
one) with PresenceConsumerMixin, as docs/howto-existing-channels-app.md adds it: the socket is
in the room of its URL from the start (``presence_connect(rooms=...)``), a presence socket in
that room sees it, and the chat's own group and text frames work beside presence's."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from channels.auth import AuthMiddlewareStack
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import channel_layers
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from presence_app.core.connection import get_async_store

from ..servers import ROOT
from ..ws import ORIGIN, Socket, make_user, presence_settings, shutdown

# The tutorial's project is laid out as the tutorial's: its apps are top-level modules.
sys.path.insert(0, str(ROOT / "tests" / "tutorial_project"))
from chat.consumers import ChatConsumer  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)

#: The URL room's join waits here (after the hello) until the test has taken Redis away.
HOLD: dict[str, asyncio.Event] = {}


async def hold_url_join(user, room):
    if room == "lobby" and HOLD:
        HOLD["entered"].set()
        await HOLD["release"].wait()
    return True


def chat_app() -> Any:
    return AuthMiddlewareStack(URLRouter(websocket_urlpatterns))


async def chat_text(sock: Socket) -> dict[str, Any]:
    """The next frame of the chat's own (the tutorial's ``{"message": ...}``, typed)."""
    return await sock.wait_for("chat.message")


@pytest.fixture
async def fast(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        yield
        await shutdown()
    channel_layers.backends.clear()


async def test_the_room_of_the_url_is_joined_and_the_chat_still_works(fast):
    _, ann_cookie = await make_user("ann")
    ben, ben_cookie = await make_user("ben")
    assert not issubclass(ChatConsumer, AsyncJsonWebsocketConsumer)  # the plain one
    ann = await Socket.open(ann_cookie, path="/ws/chat/lobby/", app=chat_app(), name="ann")
    # In the room of its URL without asking: the snapshot comes unasked.
    ann.beat()  # as presence.js does: FAST's leases last 2 s
    state = await ann.wait_for("presence.state", room="lobby")
    assert [m["user"] for m in state["members"]] == [ann.user]
    assert await get_async_store().room_members("lobby") == [ann.user]

    # Presence frames on the chat's socket: a heartbeat, a status; the room sees them.
    watcher = await Socket.open(ben_cookie, name="ben-presence")
    watcher.beat()
    await watcher.send(type="join", room="lobby")
    await watcher.wait_for("presence.state", room="lobby")
    await ann.send(type="heartbeat")
    await ann.wait_for("heartbeat.ack")
    await ann.send(type="status", state="dnd")
    await watcher.wait_for("presence.update", user=ann.user, state="dnd")

    # The tutorial's own frames and group (chat_lobby), beside presence's groups.
    ben_chat = await Socket.open(ben_cookie, path="/ws/chat/lobby/", app=chat_app(), name="ben")
    state = await ben_chat.wait_for("presence.state", room="lobby")
    assert {m["user"] for m in state["members"]} == {ann.user, str(ben.pk)}
    await ann.send_text(json.dumps({"type": "chat.message", "message": "hello"}))
    assert await chat_text(ben_chat) == {"type": "chat.message", "message": "hello"}
    assert await chat_text(ann) == {"type": "chat.message", "message": "hello"}

    # Closed: the room sees ann leave once the grace ends.
    await ann.close()
    await watcher.wait_for("presence.leave", timeout=20, room="lobby", user=ann.user)
    await ben_chat.close()
    await watcher.close()


async def test_an_anonymous_chat_socket_is_closed_with_4401(fast):
    comm = WebsocketCommunicator(chat_app(), "/ws/chat/lobby/", headers=[(b"origin", ORIGIN)])
    connected, _ = await comm.connect(timeout=20)
    assert connected
    assert await comm.receive_output(timeout=20) == {"type": "websocket.close", "code": 4401}
    assert await get_async_store().room_members("lobby") == []


async def test_a_room_name_presence_refuses_leaves_the_chat_working(fast):
    """The tutorial's ``\\w+`` admits "_staff"; ROOM_NAME_PATTERN does not (the how-to says so)."""
    _, cookie = await make_user("ann")
    ann = await Socket.open(cookie, path="/ws/chat/_staff/", app=chat_app(), name="ann")
    error = await ann.wait_for("error", frame="join")
    assert error["code"] == "invalid"
    await ann.send_text(json.dumps({"message": "still here"}))  # the tutorial's, untyped
    assert await chat_text(ann) == {"type": "chat.message", "message": "still here"}
    await ann.close()


async def test_the_url_room_join_cut_short_by_an_outage_is_made_when_redis_is_back(fast):
    """The browser never asked for the URL's room, so it will not ask again: like a permanent
    room's, the join an outage refused is made by the connection once Redis answers."""
    hook = "tests.docs.test_tutorial_consumer.hold_url_join"
    with presence_settings(CAN_JOIN=hook):
        ann, cookie = await make_user("ann")
        HOLD.update(entered=asyncio.Event(), release=asyncio.Event())
        try:
            opening = asyncio.ensure_future(
                Socket.open(cookie, path="/ws/chat/lobby/", app=chat_app(), name="ann")
            )
            await asyncio.wait_for(HOLD["entered"].wait(), 10)  # hello sent, join under way
            with presence_settings(CAN_JOIN=hook, REDIS_URL="redis://127.0.0.1:1/0"):
                HOLD["release"].set()
                sock = await opening
                refused = await sock.wait_for("error", timeout=10, room="lobby")
                assert refused["code"] == "unavailable"
        finally:
            HOLD.clear()
        assert await get_async_store().room_members("lobby") == []
        sock.beat()  # Redis is back: the next heartbeat makes the join
        state = await sock.wait_for("presence.state", timeout=10, room="lobby")
        assert [m["user"] for m in state["members"]] == [str(ann.pk)]
        await sock.close()
