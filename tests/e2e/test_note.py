"""The demo's shared note in headless Chromium against a real uvicorn and Redis: Bob sees
Alice's cursor follow her pointer from line to line, and her selected line; the page in light
and dark, at 1280 and 390 px (screenshots in ``artifacts/e2e/``)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ..users import login_name
from .test_pages import LOOKS, PHONE, no_sideways_scrolling

pytestmark = pytest.mark.e2e

NOTE = "/notes/release-plan/"
ROOM = "note-release-plan"


def enter_note(demo, user: str, **context):
    page = demo.open(user, NOTE, **context)
    page.wait_for_function(
        "room => window.presence && presence.members(room).some(m => m.user === presence.userId)",
        arg=ROOM,
    )
    return page


def cursor(page, line: int, uid: str):
    return page.locator(f'.note-line[data-line="{line}"] .remote-cursor[data-user="{uid}"]')


def test_b_sees_a_cursor_move_and_a_selection(demo):
    a = enter_note(demo, "alice")
    b = enter_note(demo, "bob")
    alice = a.evaluate("() => presence.userId")
    a.hover('.note-line[data-line="3"] .text')
    expect(cursor(b, 3, alice)).to_have_count(1)
    expect(cursor(b, 3, alice).locator(".cursor-label")).to_have_text(login_name("alice"))
    # Moving on: the cursor leaves line 3 for line 7 (one cursor per tab, the latest place).
    a.hover('.note-line[data-line="7"] .text')
    expect(cursor(b, 7, alice)).to_have_count(1)
    expect(b.locator(f'.remote-cursor[data-user="{alice}"]')).to_have_count(1)
    a.click('.note-line[data-line="7"] .text')
    expect(b.locator('.note-line[data-line="7"]')).to_have_class("note-line selected")
    expect(b.locator(f'#viewers li[data-user="{alice}"] .status')).to_have_text(
        "line 7 · selected 7"
    )
    # Alice leaves the note: her cursor goes from Bob's page.
    a.evaluate(f"() => presence.leave({ROOM!r})")
    expect(b.locator(f'.remote-cursor[data-user="{alice}"]')).to_have_count(0)


def test_over_sse_and_websocket_both_ways(demo):
    """Alice's page runs over SSE + REST (presence.js' fallback), Bob's over the WebSocket."""
    a = demo.open("alice", NOTE + "?transport=sse")
    a.wait_for_function(
        "room => window.presence && presence.transport === 'sse'"
        " && presence.members(room).some(m => m.user === presence.userId)",
        arg=ROOM,
    )
    b = enter_note(demo, "bob")
    alice, bob = (p.evaluate("() => presence.userId") for p in (a, b))
    a.hover('.note-line[data-line="4"] .text')
    expect(cursor(b, 4, alice)).to_have_count(1)
    b.hover('.note-line[data-line="6"] .text')
    expect(cursor(a, 6, bob)).to_have_count(1)


@pytest.mark.parametrize("scheme, width", LOOKS)
def test_the_note_in_light_and_dark_on_desktop_and_phone(demo, scheme, width):
    a = enter_note(demo, "alice")
    b = enter_note(demo, "bob", color_scheme=scheme, width=width)
    alice = a.evaluate("() => presence.userId")
    a.hover('.note-line[data-line="2"] .text')
    a.click('.note-line[data-line="2"] .text')
    expect(cursor(b, 2, alice)).to_have_count(1)
    expect(b.locator('.note-line[data-line="2"]')).to_have_class("note-line selected")
    b.hover('.note-line[data-line="5"] .text')
    no_sideways_scrolling(b)
    label = cursor(b, 2, alice).locator(".cursor-label").bounding_box()
    assert label is not None and 0 <= label["x"] and label["x"] + label["width"] <= width
    kind = "phone" if width == PHONE else "desktop"
    path = demo.screenshot(b, f"note-{scheme}-{kind}")
    assert path.stat().st_size > 0
