"""A sign-out ends what the browser's tabs share, in headless Chromium against a real uvicorn.

Alice signs in through the login form in one browser context and opens the lobby in two tabs:
they share one connection (a SharedWorker's, or a leader tab's; or each its own, ``?share=0``).
She signs out in one of them. Then:

- her other tab's connection ends (the server closes the sockets of that sign-in, 4402) and
  connects again as the browser now is: signed out (4401, ``unauthorized``);
- a signed-out page opened next that runs presence.js (the login page) gets a connection of
  its own, refused (4401): it never joins the connection Alice's tabs held (the CSRF token it
  shared by changed at the sign-out);
- Bob, signing in next in the same browser, connects as Bob;
- none of these pages ever hears what only Alice may see: her status, set invisible with a
  message from her phone (a session of its own, still signed in), reaches her own connections
  only; and no connection of Alice's is left in the store but the phone's.

And where the CSRF cookie is HttpOnly (no page can read it), tabs share nothing by default.

Timers: tests/e2e/settings.py's (heartbeat 1 s, lease 4 s, grace 3 s, sweep 0.5 s).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..servers import AsgiServer, Database
from ..users import login_name
from .connections import WITHIN, connections, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LOBBY = "lobby"
PASSWORD = "sign-out-test-pw"

JOINED = (
    "room => window.presence && presence.userId !== null"
    " && presence.members(room).some(m => m.user === presence.userId)"
)

#: Every frame each client of the page reads (a tab's own, or what its shared connection hands
#: it), kept on the page from its first: presence.js is trapped as it defines window.Presence.
RECORD_FRAMES = """(() => {
    window.heardFrames = [];
    window.heardEvents = [];
    let value;
    Object.defineProperty(window, "Presence", {configurable: true, get: () => value, set(v) {
        value = v;
        const receive = v.Client.prototype._receive;
        v.Client.prototype._receive = function (text) {
            heardFrames.push(String(text));
            return receive.call(this, text);
        };
        const emit = v.Client.prototype._emit;
        v.Client.prototype._emit = function (name, data) {
            if (["open", "close", "unauthorized"].includes(name)) {
                heardEvents.push([name, name === "open" ? data.user : data.code]);
            }
            return emit.call(this, name, data);
        };
    }});
})();"""

#: A browser without SharedWorker: a leader tab holds the connection.
NO_SHARED_WORKER = "delete window.SharedWorker;"


def make_server(tmp: Path, name: str, env: dict[str, str]) -> tuple[AsgiServer, Database, Any]:
    from django.conf import settings

    db = Database(
        tmp / "db.sqlite3",
        settings="tests.e2e.settings",
        env={
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_E2E_PREFIX": f"{name}-{uuid.uuid4().hex[:8]}",
            **env,
        },
    ).migrate()
    users = db.users(["alice", "bob"], password=PASSWORD)
    asgi = AsgiServer(db, name=name, log_dir=tmp)
    asgi.start()
    return asgi, db, users


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AsgiServer, Database, Any]]:
    asgi, db, users = make_server(tmp_path_factory.mktemp("sign-out"), "signout", {})
    yield asgi, db, users
    asgi.stop()


def new_page(context: Any) -> Any:
    page = context.new_page()
    page.set_default_timeout(WITHIN * 1000)
    return page


def sign_in(context: Any, asgi: AsgiServer, name: str) -> None:
    """Through the login form, as a person does (Django's login: a new session, a new CSRF
    token)."""
    page = new_page(context)
    page.goto(f"{asgi.url}/accounts/login/")
    page.fill("#id_username", login_name(name))
    page.fill("#id_password", PASSWORD)
    page.click(".login-card button.primary")
    page.wait_for_url(f"{asgi.url}/")
    page.close()


def open_lobby(context: Any, asgi: AsgiServer, query: str = "") -> Any:
    page = new_page(context)
    page.goto(f"{asgi.url}/rooms/{LOBBY}/{query}")
    page.wait_for_function(JOINED, arg=LOBBY)
    return page


def frames_naming(page: Any, mark: str) -> list[str]:
    return [f for f in page.evaluate("heardFrames") if mark in f]


@pytest.mark.parametrize(
    ("mode", "query"),
    [("worker", ""), ("leader", ""), (None, "?share=0"), (None, "?share=0&transport=sse")],
    ids=["worker", "leader", "own-socket", "own-sse-stream"],
)
def test_a_sign_out_ends_what_the_tabs_share(browser, server, mode, query):
    asgi, db, users = server
    alice_id, bob_id = users["alice"].id, users["bob"].id
    context = browser.new_context()
    context.add_init_script(RECORD_FRAMES)
    if mode == "leader":
        context.add_init_script(NO_SHARED_WORKER)
    # Alice's phone: a sign-in of its own, which her sign-out in the browser does not end.
    phone_context = browser.new_context()
    phone_context.add_cookies(
        [{"name": "sessionid", "value": users["alice"].session, "url": asgi.url}]
    )
    try:
        phone = open_lobby(phone_context, asgi)
        sign_in(context, asgi, "alice")
        # The tab that stays opens first: with the leader fallback, it holds the connection.
        stays = open_lobby(context, asgi, query)
        signs_out = open_lobby(context, asgi, query)
        for tab in (stays, signs_out):
            assert tab.evaluate("presence.shared") == mode
            assert tab.evaluate("presence.transport") == ("sse" if "sse" in query else "websocket")
            assert tab.evaluate("presence.userId") == alice_id
        if mode == "leader":
            assert stays.evaluate("presence.socket.local") is True
        mine = wait_until(
            lambda: connections(db, users["alice"]), lambda c: len(c) == (3 if mode is None else 2)
        )
        assert len(mine) == (3 if mode is None else 2)  # the phone's, and the browser's

        signs_out.click("text=Log out")
        signs_out.wait_for_url(f"{asgi.url}/accounts/login/?next=/")
        # The tab that stayed: its connection ended with the sign-in, and the one it opened
        # again, with the browser's cookies, was refused: signed out.
        stays.wait_for_function("heardEvents.some(e => e[0] === 'unauthorized')")
        codes = [e[1] for e in stays.evaluate("heardEvents") if e[0] == "close"]
        if "sse" not in query:  # a stream has no close code: it ends (1006), then 401
            assert 4402 in codes, codes

        # A signed-out page that runs presence.js: a connection of its own, refused.
        signed_out = signs_out  # the login page, in the tab that signed out
        signed_out.evaluate("heardFrames.length = 0; heardEvents.length = 0")
        signed_out.add_script_tag(url="/static/presence_app/presence.js")
        signed_out.evaluate("window.presence = Presence.connect({rooms: ['lobby']}); true")
        signed_out.wait_for_function("heardEvents.length > 0")
        assert signed_out.evaluate("heardEvents[0][0]") == "close", signed_out.evaluate(
            "heardEvents"
        )
        signed_out.wait_for_function("heardEvents.some(e => e[0] === 'unauthorized')")
        assert signed_out.evaluate("heardFrames") == []
        assert [e for e in signed_out.evaluate("heardEvents") if e[0] == "open"] == []

        # What only Alice may see: her status, invisible with a message, set from her phone.
        phone.evaluate("presence.setStatus({state: 'invisible', message: 'only-alice-1'})")
        phone.wait_for_function("presence.me && presence.me.message === 'only-alice-1'")
        # No connection of Alice's is left in this browser: the phone's alone (a closed one
        # keeps its lease for the grace, then goes).
        wait_until(lambda: connections(db, users["alice"]), lambda c: len(c) == 1)

        # Bob signs in, in the same browser, and sees Alice as a signed-in stranger does.
        sign_in(context, asgi, "bob")
        bob = open_lobby(context, asgi, query)
        assert bob.evaluate("presence.userId") == bob_id
        phone.evaluate("presence.setStatus({state: 'invisible', message: 'only-alice-2'})")
        phone.wait_for_function("presence.me && presence.me.message === 'only-alice-2'")
        phone.evaluate("presence.setStatus({state: 'online', message: 'public-3'})")
        bob.wait_for_function(
            "alice => (presence.get(alice) || {}).message === 'public-3'", arg=alice_id
        )

        for page in (stays, signed_out, bob):
            assert frames_naming(page, "only-alice") == [], page.url
        assert [e for e in bob.evaluate("heardEvents") if e[0] == "open"] == [["open", bob_id]]
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        context.close()
        phone_context.close()


@pytest.fixture(scope="module")
def httponly_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AsgiServer, Database, Any]]:
    tmp = tmp_path_factory.mktemp("httponly-csrf")
    asgi, db, users = make_server(tmp, "httponly", {"PRESENCE_E2E_CSRF_HTTPONLY": "1"})
    yield asgi, db, users
    asgi.stop()


def test_a_csrf_cookie_no_page_can_read_shares_nothing(browser, httponly_server):
    """CSRF_COOKIE_HTTPONLY: presence.js has no key to share by, so each tab holds its own
    connection (a key every sign-in of the browser had alike would share them all)."""
    asgi, db, users = httponly_server
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": users["alice"].session, "url": asgi.url}])
    try:
        tabs = [open_lobby(context, asgi) for _ in range(2)]
        assert [c["httpOnly"] for c in context.cookies() if c["name"] == "csrftoken"] == [True]
        assert [t.evaluate("presence.shared") for t in tabs] == [None, None]
        wait_until(lambda: connections(db, users["alice"]), lambda c: len(c) == 2)
        # A key the project passes still shares.
        shared = [new_page(context) for _ in range(2)]
        for page in shared:
            page.goto(f"{asgi.url}/rooms/{LOBBY}/?share=0")
            page.wait_for_function(JOINED, arg=LOBBY)
            page.evaluate(
                "() => { presence.close(); window.presence = Presence.connect("
                "{rooms: ['lobby'], shareKey: 'alice'}); return true; }"
            )
            page.wait_for_function(JOINED, arg=LOBBY)
            assert page.evaluate("presence.shared") == "worker"
        wait_until(lambda: connections(db, users["alice"]), lambda c: len(c) == 3)
    finally:
        context.close()
