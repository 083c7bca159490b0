"""A sign-out ends the live connections of that sign-in (issue 45): Django's ``logout()`` fires
``user_logged_out``, whose receiver (presence_app/apps.py) sends ``presence.signed_out`` to the
user's own group naming the session (a keyed hash of its key); each socket opened with that
session closes with 4402 (presence.js connects again with the browser's cookies), each SSE
stream ends. The user's other sign-ins (another browser, a phone) go on. And the CSRF token
changes, as Django changes it at sign-in: presence.js' tabs share a connection by it.

On the real ASGI stack (project.asgi), Redis and channel layer; the sign-out is the demo's
``LogoutView``, posted with Django's test client."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.test import AsyncClient, override_settings

from presence_app.core import dispatch

from .frame_waits import CLOSED
from .ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


async def sign_in(user) -> AsyncClient:
    """A sign-in of its own (a browser): a client holding its session cookie."""
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def session_of(client: AsyncClient) -> str:
    return client.cookies[settings.SESSION_COOKIE_NAME].value


async def test_a_sign_out_closes_the_sockets_of_that_sign_in_only(redis_client):
    with presence_settings():
        try:
            (alice, _), (_, bob_cookie) = await make_user("alice"), await make_user("bob")
            laptop, phone = await sign_in(alice), await sign_in(alice)
            # two tabs of the laptop's sign-in, one of the phone's, one of Bob's
            tabs = [await Socket.open(session_of(laptop), name=f"tab{i}") for i in range(2)]
            other = await Socket.open(session_of(phone), name="phone")
            bob = await Socket.open(bob_cookie, name="bob")
            for sock in (*tabs, other, bob):
                sock.beat()  # as presence.js does: no socket closes as silent meanwhile
            page = await laptop.get("/")  # a page with a form: the browser gets its CSRF token
            assert page.status_code == 200
            token = laptop.cookies[settings.CSRF_COOKIE_NAME].value

            reply = await laptop.post("/accounts/logout/")
            assert reply.status_code == 302

            for tab in tabs:
                closed = await tab.wait_for(CLOSED)
                assert closed["code"] == 4402
            # The phone goes on: an event to Alice's group after the sign-out's reaches it (it
            # comes after that one, to a socket still open). Bob's is not even in that group.
            await dispatch.asend_to_user(str(alice.pk), "after the sign-out")
            await other.wait_for("presence.message", payload="after the sign-out")
            await bob.send(type="heartbeat")
            await bob.wait_for("heartbeat.ack")
            assert other.closed_with is None and bob.closed_with is None
            # The browser got a new CSRF token with the sign-out's reply, as at a sign-in.
            assert laptop.cookies[settings.CSRF_COOKIE_NAME].value not in ("", token)
        finally:
            await shutdown()


async def test_a_socket_that_connects_again_at_once_is_signed_out(redis_client):
    """presence.js connects again at once at 4402, and Django's ``logout()`` flushes the session
    only after the signal's receivers have run: the sign-in ends before its sockets are told,
    so a socket opened with the old cookie meanwhile is refused (4401), not signed in again
    until the next session check. A receiver connected after presence's opens it, the earliest
    a browser could, and holds the sign-out until the socket's first frame."""
    import asyncio

    from channels.testing import WebsocketCommunicator
    from django.contrib.auth.signals import user_logged_out
    from django.test import Client

    from .ws import ORIGIN, application

    with presence_settings():
        try:
            alice, cookie = await make_user("alice")
            tab = await Socket.open(cookie, name="tab")
            tab.beat()
            loop, first = asyncio.get_running_loop(), []

            async def connect_again() -> None:
                assert (await tab.wait_for(CLOSED))["code"] == 4402
                cookies = (b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode())
                comm = WebsocketCommunicator(
                    application(), "/ws/presence/", headers=[(b"origin", ORIGIN), cookies]
                )
                again = Socket(comm, name="again")
                connected, _ = await comm.connect(timeout=20)
                assert connected  # accepted, then closed: presence.js needs the 4401
                first.append(await again.next(20))

            def receiver(**kwargs) -> None:
                asyncio.run_coroutine_threadsafe(connect_again(), loop).result(timeout=60)

            # The sign-out in a thread of its own (the sync client runs the view there), so
            # the socket's own session read does not wait on the held view's thread.
            browser = Client()
            browser.cookies[settings.SESSION_COOKIE_NAME] = cookie
            user_logged_out.connect(receiver, dispatch_uid="test.connect_again")
            try:
                reply = await asyncio.to_thread(browser.post, "/accounts/logout/")
            finally:
                user_logged_out.disconnect(dispatch_uid="test.connect_again")
            assert reply.status_code == 302
            assert [(f["type"], f.get("code")) for f in first] == [(CLOSED, 4401)], first
        finally:
            await shutdown()


async def test_an_event_naming_another_session_closes_nothing(redis_client):
    """Only the tag of the socket's own session closes it: not another session's, and not a
    forged event without one."""
    with presence_settings():
        try:
            alice, cookie = await make_user("alice")
            sock = await Socket.open(cookie, name="a")
            sock.beat()
            await dispatch.aend_session(str(alice.pk), "another-session-key")
            await get_channel_layer().group_send(
                dispatch.self_group(str(alice.pk)), {"type": "presence.signed_out"}
            )
            # an event to the same group after them: it comes after them, and the socket is
            # still there to relay it
            await dispatch.asend_to_user(str(alice.pk), "still here")
            await sock.wait_for("presence.message", payload="still here")
            assert sock.closed_with is None
            await dispatch.aend_session(str(alice.pk), cookie)
            assert (await sock.wait_for(CLOSED))["code"] == 4402
        finally:
            await shutdown()


def acme(source) -> str:
    """Every request and socket of the test is in workspace "acme"."""
    return "acme"


async def test_a_sign_out_reaches_the_sockets_of_its_workspace_without_the_middleware(redis_client):
    """TENANT: the socket's groups are its workspace's; the sign-out is sent in the request's
    workspace, resolved by the hook itself (a project need not install PresenceMiddleware)."""
    without = [m for m in settings.MIDDLEWARE if not m.startswith("presence_app.")]
    with presence_settings(TENANT=acme), override_settings(MIDDLEWARE=without):
        try:
            alice, _ = await make_user("alice")
            browser = await sign_in(alice)
            sock = await Socket.open(session_of(browser), name="a")
            sock.beat()
            assert (await browser.post("/accounts/logout/")).status_code == 302
            assert (await sock.wait_for(CLOSED))["code"] == 4402
        finally:
            await shutdown()


async def test_alogout_ends_them_too(redis_client):
    """Django's async ``alogout()`` sends the signal with ``asend``: the receiver (sync) runs in
    a thread, and the sign-out reaches the socket all the same."""
    from importlib import import_module

    from django.contrib.auth import alogout
    from django.test import RequestFactory

    with presence_settings():
        try:
            alice, _ = await make_user("alice")
            browser = await sign_in(alice)
            sock = await Socket.open(session_of(browser), name="a")
            sock.beat()
            request = RequestFactory().post("/accounts/logout/")
            engine = import_module(settings.SESSION_ENGINE)
            request.session = engine.SessionStore(session_of(browser))

            async def auser():
                return alice

            request.user, request.auser = alice, auser
            await alogout(request)
            assert (await sock.wait_for(CLOSED))["code"] == 4402
        finally:
            await shutdown()
