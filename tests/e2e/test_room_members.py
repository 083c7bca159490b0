"""``{% room_members "room" %}`` alone, on a presence.js page in headless Chromium against a real
uvicorn and Redis (the demo's ``who/<room>/`` page): Alice sees Bob's name and dot come into
the room's list as he joins, his dot turn red when he sets do not disturb, his row go while he
is invisible and when he leaves; the list and the count of everyone but her never show her,
those of everyone do."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from ..users import login_name
from .test_demo import has_class

pytestmark = pytest.mark.e2e

ROOM = "random"


def joined(page):
    page.wait_for_function(
        "room => window.presence && presence.members(room).some(m => m.user === presence.userId)",
        arg=ROOM,
    )
    return page


def test_a_room_s_list_names_who_joins_and_leaves_and_others_leave_the_viewer_out(demo):
    alice, bob = login_name("alice"), login_name("bob")  # no full names: their usernames
    a = joined(demo.open("alice", f"/who/{ROOM}/"))
    me = a.evaluate("presence.userId")
    others = a.locator("#others .presence-room-member")
    everyone = a.locator("#everyone .presence-room-member")
    expect(a.locator("#everyone .presence-room-member-name")).to_have_text([alice])
    expect(a.locator("#count")).to_have_text("1")
    expect(others).to_have_count(0)
    expect(a.locator("#others-count")).to_have_text("0")

    # Bob comes in (his page was not there when Alice's was rendered): his name, from the
    # server's names endpoint, and his dot, green, in both lists; the counts follow.
    b = demo.enter("bob", ROOM)
    bob_id = b.evaluate("presence.userId")
    expect(a.locator("#others .presence-room-member-name")).to_have_text([bob])
    expect(others).to_be_visible()  # shown once named
    expect(a.locator("#everyone .presence-room-member-name")).to_have_text([alice, bob])
    expect(others).to_have_attribute("data-presence-room-member", bob_id)
    bob_dot = a.locator(f'#others [data-presence-user="{bob_id}"]')
    expect(bob_dot).to_have_class(has_class("presence-online"))
    expect(a.locator("#others-count")).to_have_text("1")
    expect(a.locator("#count")).to_have_text("2")
    assert a.locator(f'#others [data-presence-room-member="{me}"]').count() == 0

    # An update moves his dot.
    b.evaluate("presence.setStatus({state: 'dnd', message: 'Deep work'})")
    expect(bob_dot).to_have_class(has_class("presence-dnd"))
    expect(bob_dot).to_have_attribute("aria-label", "Do not disturb: Deep work")

    # Invisible, he is in the room for nobody else: his rows go; back, they come again.
    b.evaluate("presence.setStatus({state: 'invisible', message: ''})")
    expect(others).to_have_count(0)
    expect(a.locator("#others-count")).to_have_text("0")
    expect(a.locator("#everyone .presence-room-member-name")).to_have_text([alice])
    b.evaluate("presence.setStatus({state: 'online'})")
    expect(a.locator("#others .presence-room-member-name")).to_have_text([bob])
    expect(others).to_be_visible()
    expect(bob_dot).to_have_class(has_class("presence-online"))

    # He leaves: his rows go, the counts drop back; Alice stays in the list of everyone.
    b.evaluate(f"presence.leave({ROOM!r})")
    expect(others).to_have_count(0)
    expect(a.locator("#others-count")).to_have_text("0")
    expect(a.locator("#everyone .presence-room-member-name")).to_have_text([alice])
    expect(a.locator("#count")).to_have_text("1")

    # Bob back, and a new page of Alice's: he is in the server-rendered list, named, at once.
    b.evaluate(f"presence.join({ROOM!r})")
    expect(a.locator("#others .presence-room-member-name")).to_have_text([bob])
    a2 = demo.open("alice", f"/who/{ROOM}/")
    expect(a2.locator("#others .presence-room-member-name")).to_have_text([bob])
    assert a2.locator("#others-count").inner_text() == "1"  # as rendered, before any event
    joined(a2)
    expect(a2.locator("#everyone .presence-room-member-name")).to_have_text([alice, bob])
    expect(everyone).to_have_count(2)
