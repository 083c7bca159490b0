"""One connection per browser, shared by its tabs, in headless Chromium against a real uvicorn.

Bob opens the demo's room page in eight tabs of one browser context (one browser, one sign-in);
each tab also joins a room of its own. The server holds one connection of Bob's (the store's
record of his connections, read with ``manage.py presence export``). Each tab hears the events
of its own rooms only, and sends and hears through the one connection. Bob closes his tabs one
by one, the first one first: the others stay live, and Alice, in the lobby with Bob, sees no
leave of the lobby, no offline and no dot of Bob's other than green. The same with the leader
tab fallback (SharedWorker deleted before presence.js loads): closing the tab that holds the
connection hands it to another tab within the server's grace, and a chat line Bob writes in
another tab at that moment reaches Alice.

Timers: tests/e2e/settings.py's (heartbeat 1 s, lease 4 s, grace 3 s, sweep 0.5 s).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ..servers import AsgiServer, Database
from .cdp_tab import CdpTab
from .connections import WITHIN, connections, wait_until
from .settings import TIMERS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LOBBY = "lobby"
TABS = 8

JOINED = (
    "room => window.presence && presence.userId !== null"
    " && presence.members(room).some(m => m.user === presence.userId)"
)

# Online, or idle: nobody touches Bob's tabs, and opening them may take longer than IDLE_AFTER.
ONLINE = "bob => ['online', 'idle'].includes((presence.get(bob) || {}).state)"
#: Bob's dot in the room's list of who is here (WATCH's).
DOT = '#here [data-presence-user="{}"]'

# What a tab hears, kept on the page: each join and typing with its room.
RECORD = """() => {
    window.heard = [];
    for (const name of ["join", "leave", "typing"]) {
        presence.on(name, (e) => heard.push([name, e.user, e.room]));
    }
    return true;
}"""

# Alice's page keeps every sign of Bob going it gets: leaves, offlines, each class of his dot
# (idle he may go: nobody touches his tabs).
WATCH = """bob => {
    window.aboutBob = [];
    presence.on("leave", (e) => { if (e.user === bob) aboutBob.push(["leave", e.room]); });
    presence.on("update", (e) => {
        if (e.user === bob && e.state === "offline") aboutBob.push(["offline", null]);
    });
    const dot = () => document.querySelector('#here [data-presence-user="' + bob + '"]');
    window.bobDots = [dot() && dot().className];
    new MutationObserver(() => bobDots.push(dot() && dot().className)).observe(
        document.body, {subtree: true, attributes: true, childList: true,
                        attributeFilter: ["class"]});
    return true;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AsgiServer, Database, Any]]:
    from django.conf import settings

    tmp = tmp_path_factory.mktemp("shared-tabs")
    db = Database(
        tmp / "db.sqlite3",
        settings="tests.e2e.settings",
        env={
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_E2E_PREFIX": f"shared-{uuid.uuid4().hex[:8]}",
        },
    ).migrate()
    users = db.users(["alice", "bob"])
    asgi = AsgiServer(db, name="shared", log_dir=Path(tmp))
    asgi.start()
    yield asgi, db, users
    asgi.stop()


def context_of(browser: Any, asgi: AsgiServer, user: Any, init: str | None = None) -> Any:
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": user.session, "url": asgi.url}])
    if init:
        context.add_init_script(init)
    return context


def open_tab(context: Any, asgi: AsgiServer, own_room: str | None = None) -> Any:
    page = context.new_page()
    page.set_default_timeout(WITHIN * 1000)
    page.goto(f"{asgi.url}/rooms/{LOBBY}/")
    page.wait_for_function(JOINED, arg=LOBBY)
    page.evaluate(RECORD)
    if own_room:
        page.evaluate("room => presence.join(room)", own_room)
        page.wait_for_function(JOINED, arg=own_room)
    return page


def round_trip(alice: Any, bob_tabs: list[Any], bob_id: str, mark: str) -> None:
    """Both ways through Bob's one connection: a status Bob sets in one tab reaches Alice, and
    a status Alice sets reaches every tab of Bob's still open."""
    bob_tabs[-1].evaluate("m => presence.setStatus({message: m})", mark)
    alice.wait_for_function(
        "([bob, m]) => (presence.get(bob) || {}).message === m", arg=[bob_id, mark]
    )
    alice.evaluate("m => presence.setStatus({message: m})", mark)
    alice_id = alice.evaluate("presence.userId")
    for tab in bob_tabs:
        tab.wait_for_function(
            "([alice, m]) => (presence.get(alice) || {}).message === m", arg=[alice_id, mark]
        )


def eight_tabs(browser: Any, server: Any, mode: str, init: str | None = None) -> None:
    asgi, db, users = server
    bob_id = users["bob"].id
    alice_context = context_of(browser, asgi, users["alice"])
    bob_context = context_of(browser, asgi, users["bob"], init)
    try:
        alice = open_tab(alice_context, asgi)
        rooms = [f"{mode}-tab-{i}" for i in range(TABS)]
        tabs = [open_tab(bob_context, asgi, room) for room in rooms]
        for tab in tabs:
            assert tab.evaluate("presence.shared") == mode
            assert tab.evaluate("presence.transport") == "websocket"
        # One connection for the eight tabs, as the server counts them.
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
        alice.wait_for_function(ONLINE, arg=bob_id)
        alice.wait_for_selector(DOT.format(bob_id))  # the watch's first look is at his dot
        alice.evaluate(WATCH, bob_id)

        # Each tab hears its own rooms: Alice comes into each tab's room, one after the other,
        # and types there; the tab of that room hears it, no other tab does.
        for room in rooms:
            alice.evaluate("room => presence.join(room)", room)
            alice.wait_for_function(JOINED, arg=room)
            alice.evaluate("room => presence.typing(room)", room)
        alice_id = alice.evaluate("presence.userId")
        for tab, room in zip(tabs, rooms, strict=True):
            tab.wait_for_function(
                "([alice, room]) => heard.some(e => e[0] === 'typing' && e[2] === room"
                " && e[1] === alice)",
                arg=[alice_id, room],
            )
        for tab, room in zip(tabs, rooms, strict=True):
            heard = tab.evaluate("heard")
            assert {e[2] for e in heard if e[1] == alice_id} == {room}, heard
        round_trip(alice, tabs, bob_id, "all eight")

        # Closing any tab, the first one first, keeps the others live.
        for i in range(TABS - 1):
            closed_at = time.monotonic()
            tabs[0].close()
            tabs.pop(0)
            # Its own room (no other tab of Bob's is in it) is left after the server's grace,
            # as a closed socket's rooms are: a reload would have come back to it unseen.
            alice.wait_for_function(
                "([bob, room]) => !presence.members(room).some(m => m.user === bob)",
                arg=[bob_id, rooms[i]],
            )
            waited = time.monotonic() - closed_at
            assert waited >= TIMERS["DISCONNECT_GRACE"] * 0.8, f"left after {waited:.2f} s"
            round_trip(alice, tabs, bob_id, f"closed {i + 1}")
            for tab in tabs:
                assert tab.evaluate(f"presence.members('{LOBBY}').length") >= 2
        # The last tab's is still the one connection (a new leader's has replaced the first
        # one's by now: the old one's grace is over).
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)

        # Alice saw Bob leave only the rooms of the tabs he closed: no leave of the lobby, no
        # offline; his dot never grey.
        about = alice.evaluate("aboutBob")
        assert about == [["leave", room] for room in rooms[: TABS - 1]], about
        dots = alice.evaluate("bobDots")
        assert dots and all(d and "presence-offline" not in d for d in dots), dots
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        bob_context.close()
        alice_context.close()


def test_eight_tabs_share_one_connection_in_a_shared_worker(browser, server):
    eight_tabs(browser, server, "worker")


#: A browser without SharedWorker (Chrome on Android before 2024, Safari before 16).
NO_SHARED_WORKER = "delete window.SharedWorker;"


def test_without_shared_worker_a_leader_tab_holds_the_connection(browser, server):
    eight_tabs(browser, server, "leader", NO_SHARED_WORKER)


def test_closing_the_leader_tab_hands_over_without_a_lost_frame(browser, server):
    """The leader tab (the first, which holds the connection) closes while another tab writes
    in the chat: the line reaches Alice once the next leader's connection is up, Alice sees no
    leave and no offline of Bob, and Bob's connection count comes back to one."""
    asgi, db, users = server
    bob_id = users["bob"].id
    alice_context = context_of(browser, asgi, users["alice"])
    bob_context = context_of(browser, asgi, users["bob"], NO_SHARED_WORKER)
    try:
        alice = open_tab(alice_context, asgi)
        tabs = [open_tab(bob_context, asgi) for _ in range(3)]
        assert [t.evaluate("presence.shared") for t in tabs] == ["leader"] * 3
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
        alice.wait_for_function(ONLINE, arg=bob_id)
        alice.wait_for_selector(DOT.format(bob_id))  # the watch's first look is at his dot
        alice.evaluate(WATCH, bob_id)
        # The first tab leads: closing it takes the connection with it.
        assert tabs[0].evaluate("presence.socket.local") is True
        writer = tabs[2]
        writer.fill("#composer-input", "written during the handover")
        writer.evaluate("presence.on('open', () => { window.reopened = Date.now(); }); true")
        closing = writer.evaluate("Date.now()")  # the tabs of one browser share its clock
        tabs[0].close()
        writer.press("#composer-input", "Enter")
        expect(alice.locator("#messages .message", has_text="during the handover")).to_have_count(
            1, timeout=WITHIN * 1000
        )
        reopened = writer.evaluate("window.reopened")
        print(f"the next leader's connection was up {reopened - closing} ms after the close")
        round_trip(alice, tabs[1:], bob_id, "after the handover")
        assert sum(t.evaluate("presence.socket.local") for t in tabs[1:]) == 1
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
        assert alice.evaluate("aboutBob") == []
        dots = alice.evaluate("bobDots")
        assert dots and all(d and "presence-offline" not in d for d in dots), dots
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        bob_context.close()
        alice_context.close()


#: Is ``room``'s count (a count-only room's ``presence.count``) ``n`` on this page?
COUNTED = "([room, n]) => window.presence && presence.count(room) === n"


def test_a_count_only_room_counts_in_every_tab(browser, server):
    """A count-only room (tests/e2e/settings.py's ``stage-.*``) answers a join with its count,
    not with a snapshot: each of Bob's tabs that joins it shows the count at once, the second
    too (the hub had taken a count for no answer, never asked again, and the second tab showed
    nothing until the room changed), and Alice's leave reaches both."""
    asgi, db, users = server
    stage = f"stage-{uuid.uuid4().hex[:6]}"
    alice_context = context_of(browser, asgi, users["alice"])
    bob_context = context_of(browser, asgi, users["bob"])
    try:
        alice = open_tab(alice_context, asgi)
        alice.evaluate("room => presence.join(room)", stage)
        alice.wait_for_function(COUNTED, arg=[stage, 1])
        tabs = [open_tab(bob_context, asgi) for _ in range(2)]
        assert [t.evaluate("presence.shared") for t in tabs] == ["worker"] * 2
        for tab in tabs:  # one, then the other: the second joins a room the first is in
            tab.evaluate("room => presence.join(room)", stage)
            tab.wait_for_function(COUNTED, arg=[stage, 2])
        alice.wait_for_function(COUNTED, arg=[stage, 2])
        alice.evaluate("room => presence.leave(room)", stage)
        for tab in tabs:
            tab.wait_for_function(COUNTED, arg=[stage, 1])
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        bob_context.close()
        alice_context.close()


def test_share_false_gives_each_tab_its_own_connection(browser, server):
    """The opt-out: two tabs of ``?share=0`` (the demo's ``Presence.connect({share: false})``)
    hold two connections."""
    asgi, db, users = server
    context = context_of(browser, asgi, users["bob"])
    try:
        pages = []
        for _ in range(2):
            page = context.new_page()
            page.set_default_timeout(WITHIN * 1000)
            page.goto(f"{asgi.url}/rooms/{LOBBY}/?share=0")
            page.wait_for_function(JOINED, arg=LOBBY)
            assert page.evaluate("presence.shared") is None
            assert page.evaluate("presence.socket instanceof WebSocket")
            pages.append(page)
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 2)
    finally:
        context.close()


def test_each_tab_keeps_its_room_state_and_the_latest_is_the_connections(browser, server):
    """Two tabs of Bob's in the lobby set room states: Alice sees one state of Bob's (one
    connection), the latest a tab set; each tab sees the other's as a member's (conn
    "tab:..."); when the latest's tab closes, Bob's state there is the other tab's again."""
    asgi, db, users = server
    bob_id = users["bob"].id
    alice_context = context_of(browser, asgi, users["alice"])
    bob_context = context_of(browser, asgi, users["bob"])
    # Bob's states in the lobby as a page shows them (their data, as JSON) are these.
    shows = (
        "([bob, want]) => JSON.stringify(presence.roomState('lobby')"
        ".filter(s => s.user === bob).map(s => s.data)) === want"
    )
    try:
        alice = open_tab(alice_context, asgi)
        first, second = open_tab(bob_context, asgi), open_tab(bob_context, asgi)
        assert first.evaluate("presence.setRoomState('lobby', {line: 1})")
        alice.wait_for_function(shows, arg=[bob_id, '[{"line":1}]'])
        second.wait_for_function(
            "bob => presence.roomState('lobby').some(s => s.user === bob"
            " && s.conn.startsWith('tab:') && s.data && s.data.line === 1)",
            arg=bob_id,
        )
        assert second.evaluate("presence.setRoomState('lobby', {line: 2})")
        alice.wait_for_function(shows, arg=[bob_id, '[{"line":2}]'])
        first.wait_for_function(
            "bob => presence.roomState('lobby').some(s => s.user === bob && s.data.line === 2)",
            arg=bob_id,
        )
        second.close()
        # The second tab's state went with it: Bob's is the first tab's again.
        alice.wait_for_function(shows, arg=[bob_id, '[{"line":1}]'])
        first.wait_for_function(
            "bob => !presence.roomState('lobby').some(s => s.user === bob)", arg=bob_id
        )
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
    finally:
        bob_context.close()
        alice_context.close()


def test_the_last_tab_gone_the_hub_connects_again_for_the_next(browser, server):
    """The only tab's client closes, so the hub closes the connection; a new client connects in
    the page: the same hub (a leader tab's lives as long as its page) opens a new connection
    for it, and does not hand it the closed one's hello."""
    asgi, db, users = server
    context = context_of(browser, asgi, users["bob"], NO_SHARED_WORKER)
    try:
        page = open_tab(context, asgi)
        first = page.evaluate("presence.socket.hub")
        page.evaluate("presence.close()")
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 0)
        page.evaluate(
            "window.again = Presence.connect({rooms: ['lobby'], url: presence.url}); true"
        )
        page.wait_for_function(
            "again.members('lobby').some(m => m.user === again.userId)"
            " && again.socket.readyState === 1"
        )
        assert page.evaluate("again.socket.hub") == first  # the same hub
        # a frame of the project's own goes through and comes back (the demo's chat echoes it)
        page.evaluate("window.back = []; again.on('message', (f) => back.push(f.text)); true")
        assert page.evaluate("again.send({type: 'chat.message', room: 'lobby', text: 'back'})")
        page.wait_for_function("back.includes('back')")
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
    finally:
        context.close()


#: A Content-Security-Policy that refuses every worker, as the page's first element (a route
#: that rewrote the reply's headers would make Chromium refuse the page's socket to 127.0.0.1).
NO_WORKERS = """new MutationObserver((_, watch) => {
    if (!document.head) return;
    watch.disconnect();
    const csp = document.createElement("meta");
    csp.httpEquiv = "Content-Security-Policy";
    csp.content = "worker-src 'none'";
    document.head.prepend(csp);
}).observe(document, {childList: true, subtree: true});"""


def test_where_csp_refuses_the_shared_worker_a_leader_tab_holds_it(browser, server):
    """The SharedWorker is refused (worker-src 'none'): the tabs fall back to a leader tab by
    themselves, and still make one connection."""
    asgi, db, users = server
    context = context_of(browser, asgi, users["bob"], NO_WORKERS)
    try:
        tabs = [open_tab(context, asgi) for _ in range(2)]
        assert [t.evaluate("presence.shared") for t in tabs] == ["leader", "leader"]
        wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
    finally:
        context.close()


def test_a_frozen_tab_keeps_its_user_where_the_worker_holds_the_connection(browser, server):
    """Bob's only tab is frozen through the DevTools protocol (as Chrome freezes a background
    tab) for longer than the lease and the grace: the SharedWorker, which is not frozen, keeps
    beating, so Alice sees no leave and no offline (idle, yes: nobody touches the tab); the tab
    wakes to the same connection, with no close. (A tab of its own is ended by the server and
    reconnects as it wakes: tests/e2e/test_hidden_tabs.py.)"""
    asgi, db, users = server
    bob_id = users["bob"].id
    alice_context = context_of(browser, asgi, users["alice"])
    cookie = {"name": "sessionid", "value": users["bob"].session, "url": asgi.url}
    try:
        alice = open_tab(alice_context, asgi)
        with CdpTab(f"{asgi.url}/rooms/{LOBBY}/", cookies=[cookie]) as tab:
            tab.wait_for("window.presence && presence.userId !== null")
            tab.wait_for(f"presence.members('{LOBBY}').some(m => m.user === presence.userId)")
            assert tab.evaluate("presence.shared") == "worker"
            tab.evaluate(
                "window.seen = []; presence.on('close', (e) => seen.push(e.code));"
                " presence.on('open', () => seen.push('open')); true"
            )
            alice.wait_for_function(ONLINE, arg=bob_id)
            alice.wait_for_selector(DOT.format(bob_id))  # the watch's first look is at his dot
            alice.evaluate(WATCH, bob_id)
            tab.freeze()
            # A window in which nothing may happen: past the lease, the grace and a sweep.
            time.sleep(TIMERS["LEASE_TTL"] + TIMERS["DISCONNECT_GRACE"] + 2)
            assert alice.evaluate("aboutBob") == []
            assert alice.evaluate(f"presence.members('{LOBBY}').length") == 2
            tab.resume()
            assert tab.evaluate("presence.socket.readyState") == 1
            assert tab.evaluate("seen") == []
            wait_until(lambda: connections(db, users["bob"]), lambda c: len(c) == 1)
            dots = alice.evaluate("bobDots")  # before Bob's browser goes (then he leaves)
            assert dots and all(d and "presence-offline" not in d for d in dots), dots
    finally:
        alice_context.close()
