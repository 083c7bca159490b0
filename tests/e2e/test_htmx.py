"""The demo's htmx page in headless Chromium: no presence.js, only htmx and its SSE extension
(vendored) swapping the HTML events of ``presence/sse/html/``. The page's dots, "last seen",
room list and count follow a presence.js user who joins, sets do not disturb and leaves."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .test_demo import has_class

pytestmark = pytest.mark.e2e


def person(page, name: str):
    return page.locator(f'#people li[data-user="{name}"]')


def test_an_htmx_page_is_live_from_server_rendered_events(demo, timers):
    a = demo.open("alice", "/htmx/engineering/")
    # htmx and the SSE extension, from the demo's own static files; no presence.js.
    assert a.evaluate("typeof window.htmx") == "object"
    assert a.evaluate("typeof window.Presence") == "undefined"
    # Alice's stream joined the room: its snapshot swapped in the list and the count.
    expect(a.locator("#count")).to_have_text("1")
    expect(a.locator("#here .presence-roster-name")).to_have_text(["alice"])
    expect(person(a, "alice").locator(".presence-dot")).to_have_class(has_class("presence-online"))
    expect(person(a, "alice").locator(".seen")).to_have_text("online now")

    # Bob comes in with presence.js: he joins Alice's list, green, with his name.
    b = demo.enter("bob", "engineering")
    expect(a.locator("#count")).to_have_text("2")
    expect(a.locator("#here .presence-roster-name")).to_have_text(["alice", "bob"])
    bob_dot = person(a, "bob").locator(".presence-dot")
    expect(bob_dot).to_have_class(has_class("presence-online"))
    expect(person(a, "bob").locator(".seen")).to_have_text("online now")

    # Do not disturb, with a message: the dot the server rendered says so.
    b.evaluate("presence.setStatus({state: 'dnd', message: 'Deep work'})")
    expect(bob_dot).to_have_class(has_class("presence-dnd"))
    expect(bob_dot).to_have_attribute("aria-label", "Do not disturb: Deep work")
    expect(a.locator("#here li", has_text="bob").locator(".presence-dot")).to_have_class(
        has_class("presence-dnd")
    )
    b.evaluate("presence.setStatus({state: 'online', message: ''})")
    expect(bob_dot).to_have_class(has_class("presence-online"))

    # Bob closes his tab: after the grace he leaves the list and goes grey, "last seen now".
    b.context.close()
    expect(a.locator("#count")).to_have_text("1")
    expect(a.locator("#here .presence-roster-name")).to_have_text(["alice"])
    expect(bob_dot).to_have_class(has_class("presence-offline"))
    expect(person(a, "bob").locator(".seen")).to_contain_text("last seen")
