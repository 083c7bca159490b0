"""presence.js over SSE in headless Chromium: where WebSockets cannot get through (the test
closes every WebSocket of one browser context before the server sees it), the page falls back
to the browser's own ``EventSource`` plus POSTs and still shows live presence; a WebSocket user
and the SSE user in one room see each other join, go idle, set dnd and leave."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from ..browser import SHOWN_WITHIN
from .test_demo import dot, has_class, row

pytestmark = pytest.mark.e2e


def block_websockets(page) -> None:
    """A proxy that breaks WebSockets: every socket of the page is closed at once. Playwright
    routes a page's sockets, not a SharedWorker's: the page opts out of sharing (``?share=0``)."""
    page.context.route_web_socket(re.compile(r".*"), lambda ws: ws.close())


def test_websocket_user_and_sse_user_see_each_other(demo, timers):
    a = demo.enter("alice", "design")
    b = demo.context("bob").new_page()
    b.set_default_timeout(SHOWN_WITHIN)
    demo.pages.append(b)
    block_websockets(b)
    b.goto(f"{demo.server.url}/rooms/design/?share=0")
    b.wait_for_function(
        "() => window.presence && presence.transport === 'sse'"
        " && presence.members('design').some(m => m.user === presence.userId)"
    )
    expect(b.locator("#connection")).to_have_attribute("data-transport", "sse")
    # Both see each other: the SSE page's snapshot, the socket's join event. alice has had no
    # input since her page opened: on a busy machine bob's fallback to SSE takes longer than
    # IDLE_AFTER (3 s), and she is rightly idle by then.
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))
    expect(dot(b, "here", "alice")).to_have_class(re.compile(r"presence-(online|idle)"))

    # Nobody touches either page: both go idle, each seen by the other.
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-idle"))
    expect(dot(b, "here", "alice")).to_have_class(has_class("presence-idle"))

    # dnd from the SSE page (a POST) reaches the socket, and the other way round.
    b.click('#status-form label.option:has(input[value="dnd"])')
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-dnd"))
    a.click('#status-form label.option:has(input[value="dnd"])')
    expect(dot(b, "here", "alice")).to_have_class(has_class("presence-dnd"))
    b.click('#status-form label.option:has(input[value="online"])')
    a.click('#status-form label.option:has(input[value="online"])')
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))

    # bob closes his tab: his stream ends, alice sees him leave after the grace.
    b.context.close()
    expect(row(a, "away", "bob")).to_have_count(1)
    # alice leaves: an SSE page sees that too (bob again, on a fresh SSE page).
    c = demo.context("bob").new_page()
    demo.pages.append(c)
    c.set_default_timeout(SHOWN_WITHIN)
    c.goto(f"{demo.server.url}/rooms/design/?transport=sse")
    c.wait_for_function(
        "() => window.presence && presence.transport === 'sse'"
        " && presence.members('design').some(m => m.user === presence.userId)"
    )
    expect(dot(c, "here", "alice")).to_have_class(re.compile(r"presence-(online|idle)"))
    demo.screenshot(c, "room-over-sse")
    a.context.close()
    expect(row(c, "away", "alice")).to_have_count(1)
