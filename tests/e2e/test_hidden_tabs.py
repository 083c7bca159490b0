"""A frozen tab, in headless Chromium against a real uvicorn. Bob has the room open in two
places, and the one tab is frozen (the DevTools protocol's ``Page.setWebLifecycleState``, as
Chrome freezes a background tab: no timer, no event, no heartbeat) for longer than the lease, so
the server ends that tab's socket. Alice, in the room, sees no flicker of Bob: no leave, no
offline, his dot green throughout, since his other tab is live. When the tab wakes it
reconnects at once (no backoff) and is back in the room on a WebSocket.

The frozen tab is a Chromium of its own driven over the DevTools protocol (tests/e2e/cdp_tab.py):
a page Playwright attached to cannot be frozen. Timers: tests/e2e/settings.py's (heartbeat 1 s,
lease 4 s, grace 3 s, sweep 0.5 s).

The tabs here hold their own connections (``?share=0``): a connection the tabs share lives in a
SharedWorker, which a tab's freezing or throttling does not touch (tests/e2e/test_shared_tabs.py).
"""

from __future__ import annotations

import time

import pytest

from .cdp_tab import CdpTab
from .settings import TIMERS
from .test_restart import ROOM, server  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

JOINED = (
    "window.presence && presence.transport === 'websocket'"
    f" && presence.members('{ROOM}').some(m => m.user === presence.userId)"
)

# Alice's page keeps every sign of Bob it gets: events, and each class his dot takes.
WATCH = """bob => {
    window.aboutBob = [];
    for (const name of ["leave", "update", "join"]) {
        presence.on(name, (e) => { if (e.user === bob) aboutBob.push([name, e.state || null]); });
    }
    const dot = () => document.querySelector('#here [data-presence-user="' + bob + '"]');
    window.bobDots = [dot() && dot().className];
    new MutationObserver(() => bobDots.push(dot() && dot().className)).observe(
        document.body, {subtree: true, attributes: true, childList: true,
                        attributeFilter: ["class"]});
}"""

RECORD = """(() => {
    window.seen = [];
    presence.on("close", (e) => seen.push(["close", e.code, e.reconnectIn, Date.now()]));
    presence.on("open", () => seen.push(["open", null, null, Date.now()]));
    return true;
})()"""


def test_a_frozen_tab_shows_no_flicker_and_wakes_at_once(browser, server):  # noqa: F811
    asgi, users = server
    contexts = []
    try:
        pages = {}
        for name in ("alice", "bob"):
            context = browser.new_context()
            contexts.append(context)
            context.add_cookies(
                [{"name": "sessionid", "value": users[name].session, "url": asgi.url}]
            )
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(f"{asgi.url}/rooms/{ROOM}/?share=0")
            page.wait_for_function(JOINED)
            pages[name] = page
        alice, bob_live = pages["alice"], pages["bob"]
        bob = users["bob"].id
        cookie = {"name": "sessionid", "value": users["bob"].session, "url": asgi.url}
        with CdpTab(f"{asgi.url}/rooms/{ROOM}/?share=0", cookies=[cookie]) as frozen:
            frozen.wait_for(JOINED)
            assert frozen.evaluate("presence.userId") == bob
            frozen.evaluate(RECORD)
            alice.wait_for_function("bob => presence.get(bob).state === 'online'", arg=bob)
            alice.evaluate(WATCH, bob)

            frozen.freeze()
            frozen_at = time.monotonic()
            # Frozen past the lease (the server ends the tab's socket), the grace and a sweep
            # (its connection leaves the room). A window in which nothing may happen: a sleep.
            # Bob keeps using his live tab meanwhile (input is activity: not idle).
            window = TIMERS["LEASE_TTL"] + TIMERS["DISCONNECT_GRACE"] + TIMERS["SWEEP_INTERVAL"]
            while time.monotonic() - frozen_at < window + 2:
                bob_live.keyboard.press("Shift")
                time.sleep(0.5)
            frozen.resume()
            woke_at = time.time() * 1000

            # Back at once: the old socket is dropped as it wakes, a new one opens without a
            # backoff, and the room is joined again.
            frozen.wait_for("seen.some(e => e[0] === 'open')")
            frozen.wait_for(JOINED)
            seen = frozen.evaluate("seen")
            closes = [e for e in seen if e[0] == "close"]
            assert closes and closes[0][2] == 0, seen  # reconnect in 0 ms
            opened = next(e for e in seen if e[0] == "open")
            print(f"the frozen tab reopened {opened[3] - woke_at:.0f} ms after it woke: {seen}")
            assert frozen.evaluate("presence.transport") == "websocket"

        # Alice saw nothing of it: no leave, no offline, no idle; his dot green all along.
        assert alice.evaluate("aboutBob") == []
        dots = alice.evaluate("bobDots")
        assert dots and all(d and "presence-online" in d for d in dots), dots
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        for context in contexts:
            context.close()


#: Chrome's intensive throttling of a hidden page's timers (once a minute) after 5 s hidden,
#: not 5 minutes: what a background tab meets, within a test's time.
THROTTLED = "--enable-features=IntensiveWakeUpThrottling:grace_period_seconds/5"

HIDDEN_WATCH = """bob => {
    window.aboutBob = [];
    presence.on("leave", (e) => { if (e.user === bob) aboutBob.push(["leave", e.room]); });
    presence.on("update", (e) => {
        if (e.user === bob && e.state === "offline") aboutBob.push(["offline", null]);
    });
}"""


def test_a_hidden_throttled_tab_keeps_its_socket_on_a_short_lease(browser, server):  # noqa: F811
    """Bob's only tab is hidden, its page timers throttled to once a minute, for many leases
    (4 s): its heartbeats keep time in a worker, so the server never ends its socket and Alice
    never sees Bob leave or go offline (idle he may go: nobody touches the hidden tab)."""
    asgi, users = server
    context = browser.new_context()
    try:
        context.add_cookies(
            [{"name": "sessionid", "value": users["alice"].session, "url": asgi.url}]
        )
        alice = context.new_page()
        alice.set_default_timeout(15_000)
        alice.goto(f"{asgi.url}/rooms/{ROOM}/?share=0")
        alice.wait_for_function(JOINED)
        bob = users["bob"].id
        cookie = {"name": "sessionid", "value": users["bob"].session, "url": asgi.url}
        with CdpTab(
            f"{asgi.url}/rooms/{ROOM}/?share=0", cookies=[cookie], args=[THROTTLED]
        ) as hidden:
            hidden.wait_for(JOINED)
            hidden.evaluate(RECORD)
            alice.wait_for_function("bob => presence.get(bob).state === 'online'", arg=bob)
            alice.evaluate(HIDDEN_WATCH, bob)
            # Hidden as a background tab is (the DevTools protocol's freeze hides the page;
            # it runs again, hidden, once resumed), with a page timer of our own to count.
            hidden.evaluate("window.ticks = 0; setInterval(() => ticks++, 250); true")
            hidden.freeze()
            hidden.resume()
            assert hidden.evaluate("document.visibilityState") == "hidden"
            window = 8 * TIMERS["LEASE_TTL"]  # nothing may happen: a sleep
            time.sleep(window)
            # The page's own timer was throttled (4 a second unthrottled)...
            ticks = hidden.evaluate("ticks")
            assert ticks < window, ticks
            # ...and the socket lived on: no close, no reconnect.
            assert hidden.evaluate("seen") == []
            assert hidden.evaluate("presence.socket.readyState") == 1
        # Alice saw Bob neither leave nor go offline while his tab was hidden.
        assert alice.evaluate("aboutBob") == []
    finally:
        context.close()


def test_where_csp_refuses_the_worker_a_page_timer_beats(browser, server):  # noqa: F811
    """A Content-Security-Policy whose worker-src leaves blob: out: the worker is refused, the
    client falls back to a page timer, and the socket lives on past several leases."""
    asgi, users = server
    context = browser.new_context()
    try:
        context.add_cookies([{"name": "sessionid", "value": users["bob"].session, "url": asgi.url}])

        # The policy as the page's first element (a route that rewrote the reply's headers
        # would make Chromium's local network checks refuse the page's socket to 127.0.0.1).
        context.add_init_script(
            """new MutationObserver((_, watch) => {
                if (!document.head) return;
                watch.disconnect();
                const csp = document.createElement("meta");
                csp.httpEquiv = "Content-Security-Policy";
                csp.content = "worker-src 'self'";
                document.head.prepend(csp);
            }).observe(document, {childList: true, subtree: true});"""
        )
        page = context.new_page()
        page.set_default_timeout(15_000)
        refused = []
        page.on("console", lambda m: "worker-src" in m.text and refused.append(m.text))
        page.goto(f"{asgi.url}/rooms/{ROOM}/?share=0")
        page.wait_for_function(JOINED)
        page.evaluate(RECORD)
        time.sleep(3 * TIMERS["LEASE_TTL"])  # a window in which nothing may happen
        assert refused, "the policy did not refuse the worker"
        assert page.evaluate("seen") == []
        assert page.evaluate("presence.socket.readyState") == 1
    finally:
        context.close()
