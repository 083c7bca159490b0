"""A socket's sign-in is checked again every SESSION_CHECK_INTERVAL (presence_app.realtime.signin),
on real sockets, the project's session store and Redis: a password change or a deleted session
closes the sockets it signed in (4402), and nobody else's."""

from __future__ import annotations

import asyncio
from importlib import import_module

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.conf import settings

from presence_app.consumers import CLOSE_SIGNED_OUT

from ..frame_waits import CLOSED
from ..timing import limit
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

CHECK = 0.5  # SESSION_CHECK_INTERVAL here


@pytest.fixture
async def checking(redis_client):
    channel_layers.backends.clear()
    with presence_settings(SESSION_CHECK_INTERVAL=CHECK):
        try:
            yield
        finally:
            await shutdown()


async def closed_within(sock: Socket, seconds: float) -> int | None:
    """The close code once the socket is closed, waiting up to ``seconds`` (it beats)."""
    frame = await sock.wait_for(CLOSED, timeout=seconds)
    return frame["code"]


async def test_a_password_change_closes_the_sockets_it_signed_out(checking):
    ann, ann_cookie = await make_user("ann")
    _, bob_cookie = await make_user("bob")
    a, b = await Socket.open(ann_cookie, name="ann"), await Socket.open(bob_cookie, name="bob")
    a.beat(0.2)
    b.beat(0.2)

    ann.set_password("a new password")  # Django signs out her other sessions: so do sockets
    await ann.asave()
    assert await closed_within(a, limit(CHECK + 1)) == CLOSE_SIGNED_OUT
    await asyncio.sleep(2 * CHECK)  # Bob's sign-in was checked again too, and holds
    assert b.closed_with is None
    await b.close()


async def test_a_deleted_session_closes_its_socket(checking):
    _, cookie = await make_user("ann")
    sock = await Socket.open(cookie, name="ann")
    sock.beat(0.2)
    store = import_module(settings.SESSION_ENGINE).SessionStore(cookie)
    await sync_to_async(store.delete)()  # the site signs it out ("everywhere", a flush)
    assert await closed_within(sock, limit(CHECK + 1)) == CLOSE_SIGNED_OUT


async def test_without_the_check_the_socket_stays(redis_client):
    channel_layers.backends.clear()
    with presence_settings(SESSION_CHECK_INTERVAL=0):
        try:
            ann, cookie = await make_user("ann")
            sock = await Socket.open(cookie, name="ann")
            sock.beat(0.2)
            ann.set_password("a new password")
            await ann.asave()
            await asyncio.sleep(3 * CHECK)
            assert sock.closed_with is None  # Channels' own rule: checked at the connect
            await sock.close()
        finally:
            await shutdown()
