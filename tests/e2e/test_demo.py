"""The demo in headless Chromium against a real uvicorn and Redis: two people (two browser
contexts) in one room see each other's presence change live.

Each test uses its own room where it can, and every page leaves its rooms and drops its status
when the test ends (conftest's ``Demo.close``), so the tests do not depend on each other.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from ..users import login_name

pytestmark = pytest.mark.e2e


def has_class(name: str) -> re.Pattern[str]:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def row(page, where: str, name: str):
    """``name``'s row in the room page's "In this room" (``here``) or "Not in this room"
    (``away``) list."""
    return page.locator(f'#{where} .member[data-name="{login_name(name)}"]')


def dot(page, where: str, name: str):
    return row(page, where, name).locator(".presence-dot")


def test_login_and_logout(demo):
    page = demo.open(None, "/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.click('.quick-logins button[data-user="carol"]')
    expect(page).to_have_url(f"{demo.server.url}/")
    expect(page.locator(".me-name")).to_contain_text("carol")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    page.click("text=Log out")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    page.goto(f"{demo.server.url}/rooms/lobby/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/rooms/lobby/$"))


def test_b_joins_and_turns_green(demo):
    demo.login("bob")  # bob's login made him online for ONLINE_WINDOW; let that pass first
    a = demo.enter("alice", "lobby")
    expect(dot(a, "away", "bob")).to_have_class(has_class("presence-offline"))
    expect(a.locator('[data-presence-room-count="lobby"]')).to_have_text("1")

    demo.enter("bob", "lobby")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))
    expect(row(a, "away", "bob")).to_have_count(0)
    expect(a.locator('[data-presence-room-count="lobby"]')).to_have_text("2")
    expect(row(a, "here", "bob").locator("[data-status]")).to_have_text("Online")


def test_b_without_input_turns_yellow(demo, timers):
    a = demo.enter("alice", "design")
    b = demo.enter("bob", "design")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))

    # Nobody touches bob's page: heartbeats go on, but they are not activity.
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-idle"))
    expect(row(a, "here", "bob").locator("[data-status]")).to_have_text("Away")

    # Input on bob's page is activity: green again.
    b.mouse.move(200, 200)
    b.mouse.move(260, 240)
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))


def test_b_sets_do_not_disturb_red(demo):
    a = demo.enter("alice", "engineering")
    b = demo.enter("bob", "engineering")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))

    b.click('#status-form label.option:has(input[value="dnd"])')
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-dnd"))
    # bob's own echo of the change ("self") resets his picker, the message included: the emoji
    # must fill it in after that, not before (on a busy machine the echo can come late).
    expect(b.locator("#status-note")).to_have_text("Everybody sees you as do not disturb.")
    b.click('#status-form label.emoji[title="In a meeting"]')  # fills in the message
    expect(b.locator("#status-message")).to_have_value("In a meeting")
    b.click("#status-form button[type=submit]")
    bob = row(a, "here", "bob")
    # The written state stays beside the message: the red dot alone is not enough for everybody.
    expect(bob.locator("[data-status]")).to_have_text("Do not disturb · 📅 In a meeting")
    expect(bob.locator(".presence-dot")).to_have_attribute(
        "title", "Do not disturb: 📅 In a meeting"
    )
    # bob sees his own status in the picker and in his own row.
    expect(b.locator('#status-form input[value="dnd"]')).to_be_checked()
    expect(row(b, "here", "bob").locator("[data-status]")).to_have_text(
        "Do not disturb · 📅 In a meeting"
    )

    # bob types: alice sees the typing indicator (nothing else leaves bob's page).
    b.fill("#composer-input", "hello?")
    expect(a.locator("#typing")).to_contain_text("bob is typing")
    expect(bob.locator(".typing-badge")).to_be_visible()
    demo.screenshot(a, "room")
    demo.screenshot(b, "room-status-picker")


def test_b_goes_invisible_and_a_sees_b_leave(demo):
    a = demo.enter("alice", "random")
    b = demo.enter("bob", "random")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))

    b.click('#status-form label.option:has(input[value="invisible"])')
    expect(dot(a, "away", "bob")).to_have_class(has_class("presence-offline"))
    expect(row(a, "here", "bob")).to_have_count(0)
    expect(row(a, "away", "bob").locator("[data-seen]")).to_have_text("last seen just now")
    expect(a.locator('[data-presence-room-count="random"]')).to_have_text("1")
    # bob is still in the room from where he stands, shown invisible (a hollow dot) to himself.
    expect(dot(b, "here", "bob")).to_have_class(has_class("presence-invisible"))
    expect(b.locator(".me-name .presence-dot")).to_have_class(has_class("presence-invisible"))

    # Visible again: he comes back.
    b.click('#status-form label.option:has(input[value="online"])')
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))


def test_b_hides_when_last_seen_and_a_sees_no_time(demo):
    a = demo.enter("alice", "engineering")
    b = demo.enter("bob", "engineering")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))
    b.select_option('#privacy select[name="last_seen"]', "nobody")
    expect(b.locator("#privacy")).to_have_attribute("data-saved", "nobody")
    try:
        b.click('#status-form label.option:has(input[value="invisible"])')
        expect(dot(a, "away", "bob")).to_have_class(has_class("presence-offline"))
        # Not "last seen just now": when bob was last seen is bob's to show.
        expect(row(a, "away", "bob").locator("[data-seen]")).to_have_text("offline")
        b.click('#status-form label.option:has(input[value="online"])')
        expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))
    finally:
        b.select_option('#privacy select[name="last_seen"]', "everyone")
        expect(b.locator("#privacy")).to_have_attribute("data-saved", "everyone")


def test_b_closes_the_tab_and_leaves_after_the_grace(demo, timers):
    a = demo.enter("alice", "lobby")
    b = demo.enter("bob", "lobby")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))

    closed_at = time.monotonic()
    b.context.close()
    expect(row(a, "away", "bob")).to_have_count(1)
    waited = time.monotonic() - closed_at
    assert waited >= timers["DISCONNECT_GRACE"] * 0.8, f"bob left after {waited:.2f} s: no grace"
    expect(dot(a, "away", "bob")).to_have_class(has_class("presence-offline"))
    expect(row(a, "away", "bob").locator("[data-seen]")).to_have_text("last seen just now")
    expect(a.locator('[data-presence-room-count="lobby"]')).to_have_text("1")


def test_b_reloads_within_the_grace_and_nobody_sees_a_leave(demo, timers):
    a = demo.enter("alice", "design")
    b = demo.enter("bob", "design")
    expect(dot(a, "here", "bob")).to_have_class(has_class("presence-online"))
    a.evaluate("""() => {
        window.bobLeft = [];
        presence.on("leave", (e) => window.bobLeft.push(e));
        presence.on("update", (e) => e.state === "offline" && window.bobLeft.push(e));
    }""")

    joined = "() => presence.members('design').some(m => m.user === presence.userId)"
    b.reload()
    b.wait_for_function(joined)
    # A slow reload: away for a quarter of the grace (a sweep or two), then back; the page's
    # load and its socket's connect must fit in the rest, on a loaded machine too.
    b.goto("about:blank")
    time.sleep(timers["DISCONNECT_GRACE"] / 4)
    b.goto(f"{demo.server.url}/rooms/design/")
    b.wait_for_function(joined)
    # The old sockets' leases end with the grace and the sweep evicts them: only then could a
    # leave go out. Wait that long, and a little more.
    time.sleep(timers["DISCONNECT_GRACE"] + 2 * timers["SWEEP_INTERVAL"] + 0.5)
    assert a.evaluate("window.bobLeft") == []
    expect(row(a, "here", "bob")).to_have_count(1)
    expect(dot(a, "here", "bob")).not_to_have_class(has_class("presence-offline"))


def test_admin_dashboard_lists_b_while_online(demo):
    demo.enter("alice", "lobby")
    demo.enter("bob", "engineering")
    admin = demo.open("admin", "/admin/presence_app/lastseen/dashboard/")
    bob = admin.locator("tr.presence-row", has_text="bob")
    expect(bob).to_have_count(1)
    # Online (away, on a slow machine: nobody touches bob's page meanwhile).
    expect(bob.locator(".presence-dot")).to_have_class(re.compile(r"presence-(online|idle)"))
    expect(bob.locator("td").last).to_have_text("engineering")
    expect(admin.locator("tr.presence-row", has_text="alice")).to_have_count(1)
    demo.screenshot(admin, "dashboard")


def test_room_list_counts_are_live(demo, timers):
    a = demo.open("alice", "/")
    count = a.locator('[data-room-count="random"]')
    expect(count).to_have_text("0")
    b = demo.enter("bob", "random")
    # The list polls the JSON API every 3 s.
    expect(count).to_have_text("1")
    expect(a.locator('[data-room-card="random"] .face')).to_have_attribute("title", "bob")
    expect(a.locator("#online-list")).to_contain_text("bob")
    demo.screenshot(a, "rooms")
    # The polling is not alice's activity: without input she goes away like anybody, and
    # stays away while the list goes on polling.
    expect(dot(b, "away", "alice")).to_have_class(has_class("presence-idle"))
    expect(row(b, "away", "alice").locator("[data-seen]")).to_have_text("online now")
    b.evaluate("""() => {
        window.aliceStates = [];
        presence.on("update", (e) => window.aliceStates.push(e.state));
    }""")
    time.sleep(3.5)  # more than one polling round
    assert "online" not in b.evaluate("window.aliceStates")
    expect(dot(b, "away", "alice")).to_have_class(has_class("presence-idle"))
