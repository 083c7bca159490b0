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


def test_an_htmx_page_shows_typing_and_room_states_and_sends_its_own(demo, timers):
    """Still no presence.js on Alice's page: Bob's typing and room state (presence.js) come to it
    as the stream's HTML, the typing gone once its time ran out; and what Alice writes and picks
    in the page's form goes out by hx-post to her stream, which Bob hears as from anyone."""
    a = demo.open("alice", "/htmx/engineering/")
    expect(a.locator("#count")).to_have_text("1")
    b = demo.enter("bob", "engineering")
    expect(a.locator("#count")).to_have_text("2")
    # (not the unsubscribe function on() returns: Playwright would call it)
    b.evaluate("window.heard = []; presence.on('typing', e => heard.push(e.room)); true")

    b.evaluate("presence.typing('engineering')")
    expect(a.locator("#typing")).to_have_text("bob is typing…")
    expect(a.locator("#typing")).to_have_text("")  # nothing more came: its time ran out

    b.evaluate("presence.setRoomState('engineering', {doing: 'reviewing'})")
    bobs = a.locator("#states li", has_text="bob")
    expect(bobs).to_contain_text("reviewing")

    # Alice writes a note and picks what she is doing: no script of the page's own.
    a.locator("#mine textarea").press_sequentially("hello")
    b.wait_for_function("heard.includes('engineering')")
    a.locator("#mine select").select_option("drafting a reply")
    b.wait_for_function(
        "presence.roomState('engineering').some(s => s.data && s.data.doing === 'drafting a reply')"
    )

    # Bob leaves the room: his state goes from Alice's page with him.
    b.evaluate("presence.leave('engineering')")
    expect(a.locator("#count")).to_have_text("1")
    expect(bobs).to_have_count(0)
