"""presence.js in a real browser (Chromium via Playwright) against the real ASGI app served by
uvicorn: two logged-in pages see each other's dots, status, typing, idle and leave, and a page
re-joins its room after its socket drops or its link goes dead."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import path

from presence_app.core.connection import get_store
from presence_app.testing import free_port

from ..browser import SHOWN_WITHIN, SKIP_REASON, launch, skip_browser
from ..ws import presence_settings

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(skip_browser(), reason=SKIP_REASON),
]

SCRIPT = Path(__file__).resolve().parents[2] / "presence_app/static/presence_app/presence.js"

PAGE = """<!doctype html><html><head><title>presence</title></head><body>
<span id="dot" class="presence-dot presence-offline" data-presence-user="{other}"></span>
<span id="count" data-presence-room-count="lobby">0</span>
<input id="box">
<script src="/static/presence_app/presence.js"></script>
<script>
  window.events = [];
  // The tab's own socket (share: false), which the test drops and starves: the connection
  // the browser's tabs share is tests/e2e/test_shared_tabs.py's.
  window.presence = Presence.connect({{rooms: ["lobby"], minDelay: 100, maxDelay: 400,
                                       share: false}});
  for (const name of ["open", "join", "leave", "update", "typing", "state", "self", "error"]) {{
    presence.on(name, (e) => events.push([name, e.user || null, e.state || null, e.room || null]));
  }}
</script></body></html>"""


# The test server's URLs (ROOT_URLCONF points here): the page and the script come from the
# server's own origin, as on a real site.
def page_view(request, other):
    return HttpResponse(PAGE.format(other=other))


def script_view(request, name):
    return HttpResponse((SCRIPT.parent / name).read_text(), content_type="text/javascript")


# The project's own frames beside presence on the demo's chat socket (ws/chat/): the message
# event must hear only those. Every frame the socket delivers is logged too (frames).
CHAT_PAGE = """<!doctype html><html><head><title>chat</title></head><body>
<script src="/static/presence_app/presence.js"></script>
<script>
  window.frames_seen = [];
  window.messages = [];
  const receive = Presence.Client.prototype._receive;
  Presence.Client.prototype._receive = function (text) {
    frames_seen.push(JSON.parse(text).type);
    return receive.call(this, text);
  };
  // share: false: the page's own socket, whose heartbeat the test sends (a shared
  // connection's heartbeats are its hub's)
  window.presence = Presence.connect({url: "ws://" + location.host + "/ws/chat/",
                                      rooms: ["lobby"], share: false});
  presence.on("message", (frame) => messages.push(frame));
</script></body></html>"""

# presence.mjs, as a bundler or a <script type="module"> uses it.
MODULE_PAGE = """<!doctype html><html><head><title>module</title></head><body>
<span id="me" class="presence-dot" data-presence-user="{me}"></span>
<script type="module">
  import Presence, {{connect, PresenceClient}} from "/static/presence_app/presence.mjs";
  window.client = connect({{rooms: ["lobby"]}});
  window.same = Presence === window.Presence && client instanceof PresenceClient;
  window.opened = new Promise((resolve) => client.on("open", resolve));
</script></body></html>"""


# The tags presence.js keeps live with no code of the page's own: the last seen text, a
# permanent room's roster, and the page's own dot (online on the first page, before the socket).
LIVE_PAGE = """{% load presence %}<!doctype html><html lang="en"><head><title>live</title></head><body>
<div id="me">{% presence_dot request.user %}</div>
<div id="seen">{% last_seen other %}</div>
<div id="roster">{% room_roster "team" %}</div>
<script>window.firstPaint = document.querySelector("#me .presence-dot").className;</script>
<script src="/static/presence_app/presence.js" data-presence-connect></script>
</body></html>"""


def live_view(request, other):
    from django.template import engines

    page = engines["django"].from_string(LIVE_PAGE)
    return HttpResponse(page.render({"other": other}, request))


# A page in a room, every frame type it gets logged (frames_seen), every event (events).
STORM_PAGE = """<!doctype html><html><head><title>storm</title></head><body>
<span id="count" data-presence-room-count="hall">0</span>
<script src="/static/presence_app/presence.js"></script>
<script>
  window.frames_seen = [];
  window.events = [];
  const receive = Presence.Client.prototype._receive;
  Presence.Client.prototype._receive = function (text) {
    frames_seen.push(JSON.parse(text).type);
    return receive.call(this, text);
  };
  window.presence = Presence.connect({rooms: ["hall"]});
  for (const name of ["join", "leave", "update", "diff"]) {
    presence.on(name, (e) => events.push([name, e.user || null, e.room || null]));
  }
</script></body></html>"""


def storm_view(request):
    return HttpResponse(STORM_PAGE)


def chat_view(request):
    return HttpResponse(CHAT_PAGE)


def module_view(request):
    from django.middleware.csrf import get_token

    get_token(request)  # the CSRF cookie, as a page with a form sets it: the tabs share by it
    return HttpResponse(MODULE_PAGE.format(me=request.user.pk))


urlpatterns = [
    path("e2e/<int:other>/", page_view),
    path("e2e-chat/", chat_view),
    path("e2e-storm/", storm_view),
    path("e2e-live/<int:other>/", live_view),
    path("e2e-module/", module_view),
    path("static/presence_app/<str:name>", script_view),
]


class Server:
    """The project's ASGI application under uvicorn, in a thread of this process (so that it
    shares the in-memory test database)."""

    def __init__(self) -> None:
        import uvicorn

        from project.asgi import application

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            application, host="127.0.0.1", port=self.port, lifespan="off", log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def login(username: str):
    user = get_user_model().objects.create_user(username, password="x")
    client = Client()
    client.force_login(user)
    return user, client.cookies[settings.SESSION_COOKIE_NAME].value


def open_page(browser, server: Server, cookie: str, other: int | None = None, url: str = ""):
    context = browser.new_context()
    context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": server.url}]
    )
    page = context.new_page()
    page.goto(f"{server.url}{url or f'/e2e/{other}/'}")
    return page


@contextlib.contextmanager
def served():
    """The test server and a headless Chromium, on short timers. Users log in before: the
    database is not for Playwright's thread, which runs an event loop."""
    channel_layers.backends.clear()
    with (
        presence_settings(),
        override_settings(ROOT_URLCONF=__name__),
        Server() as server,
        playwright.sync_playwright() as pw,
    ):
        browser = launch(pw)
        try:
            yield server, browser
        finally:
            browser.close()
    channel_layers.backends.clear()


def test_the_message_event_hears_only_the_projects_own_frames(redis_client):
    _, cookie = login("alice")
    with served() as (server, browser):
        page = open_page(browser, server, cookie, url="/e2e-chat/")
        page.wait_for_function("presence.members('lobby').length === 1")
        # A heartbeat now, not in HEARTBEAT_INTERVAL: its answer (heartbeat.ack) comes at once.
        page.evaluate("presence._beat()")
        page.wait_for_function("frames_seen.includes('heartbeat.ack')")
        assert page.evaluate("presence.send({type: 'chat.message', room: 'lobby', text: 'hi'})")
        page.wait_for_function("frames_seen.includes('chat.message')")
        seen = page.evaluate("frames_seen")
        assert {"hello", "presence.state", "heartbeat.ack", "chat.message"} <= set(seen)
        messages = page.evaluate("messages")
        assert [(m["type"], m["text"]) for m in messages] == [("chat.message", "hi")]


def test_presence_mjs_is_an_es_module_of_the_same_client(redis_client):
    user, cookie = login("alice")
    with served() as (server, browser):
        page = open_page(browser, server, cookie, url="/e2e-module/")
        hello = page.evaluate("opened")
        assert hello["user"] == str(user.pk)
        assert page.evaluate("same") is True
        # the tabs' shared connection runs the presence.js beside presence.mjs in its worker
        assert page.evaluate("client.shared") == "worker"
        page.wait_for_function("client.members('lobby').length === 1")
        page.wait_for_function("document.getElementById('me').dataset.presenceState === 'online'")


def wait_class(page, state: str) -> None:
    page.wait_for_function(
        f"document.getElementById('dot').classList.contains('presence-{state}')",
        timeout=SHOWN_WITHIN,
    )


def test_two_browsers_see_each_other_live(redis_client):
    channel_layers.backends.clear()
    alice, alice_cookie = login("alice")
    bob, bob_cookie = login("bob")
    # ONLINE_WINDOW: page loads and key presses keep a user online that long after their
    # last socket closes; short here, so that Bob's leaving shows within the test.
    timers = presence_settings(IDLE_AFTER=3, ONLINE_WINDOW=1)
    with (
        timers,
        override_settings(ROOT_URLCONF=__name__),
        Server() as server,
        playwright.sync_playwright() as pw,
    ):
        browser = launch(pw)
        try:
            a = open_page(browser, server, alice_cookie, other=bob.pk)
            b = open_page(browser, server, bob_cookie, other=alice.pk)

            # Bob's dot turns green on Alice's page; both count two in the lobby.
            wait_class(a, "online")
            a.wait_for_function("document.getElementById('count').textContent === '2'")
            assert a.get_attribute("#dot", "title") == "Online"
            assert a.evaluate("presence.members('lobby').length") == 2

            # Status: dnd with a message, shown in the dot's class and label.
            b.evaluate("presence.setStatus({state: 'dnd', message: 'In a meeting'})")
            wait_class(a, "dnd")
            assert a.get_attribute("#dot", "aria-label") == "Do not disturb: In a meeting"
            b.wait_for_function("presence.get(presence.userId).state === 'dnd'")

            # Typing reaches the room (and is throttled by the client).
            b.evaluate("presence.typing('lobby'); presence.typing('lobby')")
            a.wait_for_function("events.some(e => e[0] === 'typing')")
            time.sleep(0.3)
            assert a.evaluate("events.filter(e => e[0] === 'typing').length") == 1

            # Idle after IDLE_AFTER without input (heartbeats do not count); a key press is
            # activity and brings Bob back.
            b.evaluate("presence.setStatus({state: 'online', message: ''})")
            wait_class(a, "online")
            a.wait_for_function(
                "document.getElementById('dot').classList.contains('presence-idle')",
                timeout=SHOWN_WITHIN,
            )
            b.bring_to_front()
            b.keyboard.press("a")
            wait_class(a, "online")

            # Alice's socket drops: the client reconnects with backoff and re-joins the lobby.
            a.evaluate("presence.socket.close()")
            a.wait_for_function("events.filter(e => e[0] === 'open').length === 2")
            a.wait_for_function(
                "events.filter(e => e[0] === 'state' && e[3] === 'lobby').length >= 2"
            )
            deadline = time.monotonic() + SHOWN_WITHIN / 1000
            while sorted(get_store().room_members("lobby")) != sorted([str(alice.pk), str(bob.pk)]):
                assert time.monotonic() < deadline
                time.sleep(0.05)

            # Alice's link goes dead without a close (her page stops hearing the server): her
            # unanswered heartbeat drops the socket within two intervals, and she reconnects.
            a.evaluate("presence.socket.onmessage = () => {}")
            a.wait_for_function(
                "events.filter(e => e[0] === 'open').length === 3", timeout=SHOWN_WITHIN
            )
            assert a.evaluate("presence.socket.readyState") == 1

            # Bob closes his tab: after the grace, Alice sees him leave and go offline.
            b.context.close()
            a.wait_for_function(
                "document.getElementById('count').textContent === '1'", timeout=SHOWN_WITHIN
            )
            wait_class(a, "offline")
            left = a.evaluate("events.filter(e => e[0] === 'leave').map(e => e[1])")
            assert str(bob.pk) in left
            a.evaluate("presence.close()")
        finally:
            browser.close()
    channel_layers.backends.clear()


def test_last_seen_roster_and_own_dot_are_live_without_page_code(redis_client):
    from presence_app import rooms

    alice, alice_cookie = login("alice")
    bob, bob_cookie = login("bob")
    bob.first_name, bob.last_name = "Bob", "Builder"
    bob.save()
    for user in (bob, alice):  # Bob joined the team first
        rooms.add_member(user, "team")
    channel_layers.backends.clear()
    with (
        presence_settings(ONLINE_WINDOW=1),  # Bob's page load keeps him online only 1 s
        override_settings(ROOT_URLCONF=__name__),
        Server() as server,
        playwright.sync_playwright() as pw,
    ):
        browser = launch(pw)
        try:
            a = open_page(browser, server, alice_cookie, url=f"/e2e-live/{bob.pk}/")
            # Alice's first page: her own dot online as the server drew it, before any socket.
            assert "presence-online" in a.evaluate("firstPaint")
            assert a.inner_text("#seen") == "not seen yet"
            names = (
                "Array.from(document.querySelectorAll('.presence-roster-name'), e => e.textContent)"
            )
            assert a.evaluate(names) == ["alice", "Bob Builder"]  # online first: alice, herself
            a.wait_for_function("window.presence && presence.userId !== null")

            # Bob comes: his last seen turns to "online now", his row moves up with a green dot.
            b = open_page(browser, server, bob_cookie, url=f"/e2e-live/{alice.pk}/")
            a.wait_for_function("document.querySelector('#seen').textContent === 'online now'")
            row = f"document.querySelector('[data-presence-member=\"{bob.pk}\"]')"
            a.wait_for_function(f"{row}.dataset.presenceState === 'online'")
            assert a.evaluate(f"{row}.querySelector('.presence-dot').dataset.presenceState") == (
                "online"
            )
            assert a.evaluate(f"{row}.querySelector('.presence-last-seen').textContent") == (
                "online now"
            )
            assert a.evaluate(names) == ["Bob Builder", "alice"]  # both online: who joined first
            assert b.inner_text("#seen") == "online now"  # Alice, as Bob's page drew her

            # Bob goes: after the grace, "last seen just now", and he drops below the online.
            b.context.close()
            a.wait_for_function(
                "document.querySelector('#seen').textContent === 'last seen just now'",
                timeout=SHOWN_WITHIN,
            )
            a.wait_for_function(f"{row}.dataset.presenceState === 'offline'")
            assert a.evaluate(names) == ["alice", "Bob Builder"]
            assert a.evaluate(f"{row}.classList.contains('presence-offline')")
            # The text ages on this browser's clock: two minutes on (moved back here rather
            # than waited for), "last seen 2 minutes ago", in the server's words around Intl's.
            a.evaluate(
                "const el = document.querySelector('#seen .presence-last-seen');"
                "el.dataset.presenceGoneAt = String(Date.now() - 125000); presence._ageTexts()"
            )
            assert a.inner_text("#seen") == "last seen 2 minutes ago"
        finally:
            browser.close()
    channel_layers.backends.clear()


def test_a_storm_of_joins_comes_batched_and_fires_the_same_events(redis_client):
    """presence.js accepts presence.diff: twelve joins made at once reach the page in far fewer
    frames, and it still fires a join (then a leave) for each member, its list and count right."""
    from presence_app import presence

    _, cookie = login("alice")
    with served() as (server, browser):
        page = open_page(browser, server, cookie, url="/e2e-storm/")
        page.wait_for_function("presence.members('hall').length === 1")
        others = [(f"conn{n}", f"storm-{n}") for n in range(12)]

        def in_thread(fn) -> None:  # Playwright's loop runs in this one: sync code elsewhere
            with ThreadPoolExecutor(1) as pool:
                pool.submit(fn).result()

        def storm() -> None:
            for conn, user in others:
                presence.connect(conn, user)
            for conn, user in others:  # a storm: each join announced on its own
                presence.join("hall", conn, user)

        in_thread(storm)
        page.wait_for_function("presence.members('hall').length === 13", timeout=10000)
        page.wait_for_function("document.getElementById('count').textContent === '13'")
        joined = page.evaluate("events.filter(e => e[0] === 'join').map(e => e[1] + '@' + e[2])")
        assert sorted(joined) == sorted(f"{user}@hall" for _, user in others)
        diffs = page.evaluate("frames_seen.filter(t => t === 'presence.diff').length")
        assert "presence.join" not in page.evaluate("frames_seen")
        assert 1 <= diffs < len(others)
        assert page.evaluate("events.filter(e => e[0] === 'diff').length") == diffs
        in_thread(lambda: [presence.leave("hall", conn, user) for conn, user in others])
        page.wait_for_function("presence.members('hall').length === 1", timeout=10000)
        page.wait_for_function("document.getElementById('count').textContent === '1'")
        left = page.evaluate("events.filter(e => e[0] === 'leave').map(e => e[1])")
        assert sorted(left) == sorted(user for _, user in others)
        in_thread(lambda: [presence.disconnect(conn, user) for conn, user in others])
