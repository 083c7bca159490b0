"""The pages a person sees, light and dark, on a desktop and on a 390 px phone, in headless
Chromium: the admin dashboard (its 24-hour chart, its live refresh) and the demo's room page
(its top bar, the written state beside a status message, status emoji without a colour-emoji
font). Every screenshot is saved under ``artifacts/e2e/`` for a person to look at, and every
test measures what it claims: boxes inside the viewport, no sideways scrolling, contrast, the
chart's lines and gaps, aria attributes.
"""

from __future__ import annotations

import math
import re
import time

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

DASHBOARD = "/admin/presence_app/lastseen/dashboard/"
PHONE = 390
LOOKS = [
    pytest.param(scheme, width, id=f"{scheme}-{'phone' if width == PHONE else 'desktop'}")
    for scheme in ("light", "dark")
    for width in (1280, PHONE)
]

# Samples put in the server's Redis: 14 to 8 hours ago and the last 2 hours, nothing between
# (an outage) nor before (a new install). Counts between 2 and 12.
HISTORY = """
import math, time
from presence_app.core.connection import get_store
store = get_store()
minute = int(time.time() // 60) * 60
# Up to this minute: the live sweeper's sample of this minute (or of the last) joins the run
# instead of opening a gap of its own (a third line, now and then, at a minute's turn).
for ago in [*range(14 * 60, 8 * 60, -1), *range(120, -1, -1)]:
    store.record_sample(round(7 + 5 * math.sin(ago / 45)), minute - ago * 60)
"""


FRESH = """
from presence_app.core.connection import get_store
store = get_store()
store.client.delete(store.keys.history())
"""


@pytest.fixture
def history(demo_server):
    demo_server.manage("shell", "-c", HISTORY)


def shot(demo, page, name: str, scheme: str, width: int) -> None:
    path = demo.screenshot(page, f"{name}-{scheme}-{'phone' if width == PHONE else 'desktop'}")
    assert path.stat().st_size > 0


def no_sideways_scrolling(page) -> None:
    width, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"the page is {width} px wide in a {inner} px viewport"


def luminance(rgb: str) -> float:
    channels = [int(c) / 255 for c in re.findall(r"[\d.]+", rgb)[:3]]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


COLOURS = """([selector, property]) => {
    const el = document.querySelector(selector);
    let bg = el, colour;
    // The first opaque background at or above the element.
    while (bg && ["rgba(0, 0, 0, 0)", "transparent"].includes(getComputedStyle(bg).backgroundColor))
        bg = bg.parentElement;
    return [getComputedStyle(el)[property], getComputedStyle(bg || document.body).backgroundColor];
}"""


def colours(page, selector: str, prop: str = "color") -> tuple[str, str]:
    return tuple(page.evaluate(COLOURS, [selector, prop]))


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(
        """s => Array.from(document.querySelectorAll(s))
        .filter(el => el.getClientRects().length && getComputedStyle(el).visibility !== "hidden")
        .map(el => { const r = el.getBoundingClientRect();
                     return {text: el.textContent.trim(), left: r.left, right: r.right,
                             top: r.top, bottom: r.bottom, width: r.width}; })""",
        selector,
    )


#: Lays an element out anew (hidden and shown again in one task: nothing is painted between).
RELAYOUT = """(selector) => {
    const el = document.querySelector(selector);
    el.style.display = "none";
    void el.offsetHeight;
    el.style.display = "";
    void el.offsetHeight;
}"""


def drawn_with(page, selector: str) -> list[str]:
    """The fonts Chromium drew ``selector``'s text with (DevTools' "Rendered fonts")."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    cdp.detach()
    return [font["familyName"] for font in fonts]


def hover_chart(page, hours_ago: float) -> str:
    plot = page.locator(".presence-chart-plot")
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * (1 - hours_ago / 24), box["y"] + box["height"] / 2)
    tip = page.locator(".presence-chart-tip")
    expect(tip).to_be_visible()
    return tip.inner_text()


# -- the dashboard ----------------------------------------------------------------------------
@pytest.mark.parametrize(("scheme", "width"), LOOKS)
def test_the_dashboard_chart_tells_the_truth(demo, history, scheme, width):
    bob_page = demo.enter("bob", "design")
    bob_page.evaluate("presence.setStatus({state: 'dnd', message: 'Deep work', emoji: '🎧'})")
    bob_page.wait_for_function("presence.me.state === 'dnd' && presence.me.emoji === '🎧'")
    page = demo.open("admin", DASHBOARD, width=width, color_scheme=scheme)
    bob = page.locator("tr.presence-row", has_text="bob")
    expect(bob).to_have_count(1)

    # Two runs of samples, two lines: none across the outage, no ramp from 24 hours ago.
    expect(page.locator(".presence-chart polyline")).to_have_count(2)
    first_x = page.evaluate("""() => Math.min(...Array.from(
        document.querySelectorAll('.presence-chart polyline'),
        l => l.points.getItem(0).x))""")
    assert math.isclose(first_x, 10 * 60, abs_tol=2)  # 14 hours ago, in minutes of the day
    gaps = page.locator(".presence-chart-gap-label")
    expect(gaps).to_have_count(2)
    for i in range(2):
        expect(gaps.nth(i)).to_have_text("no samples")
        expect(gaps.nth(i)).to_be_visible()
    expect(page.locator(".presence-chart-summary")).to_contain_text("peak 12")

    # A labelled value axis and time marks, all inside the viewport and not on top of each other.
    expect(page.locator(".presence-chart-y-title")).to_have_text("users online")
    assert [b["text"] for b in boxes(page, ".presence-chart-y span")] == ["0", "5", "10", "15"]
    marks = boxes(page, ".presence-chart-x span")
    assert len(marks) >= (4 if width == PHONE else 7)
    assert all(re.fullmatch(r"\d\d:00", m["text"]) for m in marks)
    assert all(0 <= m["left"] and m["right"] <= width for m in marks)
    assert all(a["right"] + 4 <= b["left"] for a, b in zip(marks, marks[1:], strict=False))

    # Values under the pointer: a sample where there is one, "no sample" in the gaps.
    assert re.fullmatch(r"\d\d:\d\d · \d+ online", hover_chart(page, 1))
    expect(page.locator(".presence-chart-point")).to_be_visible()
    assert hover_chart(page, 5).endswith("· no sample")  # the outage
    expect(page.locator(".presence-chart-point")).to_be_hidden()
    assert hover_chart(page, 20).endswith("· no sample")  # before the first sample
    tip = boxes(page, ".presence-chart-tip")[0]
    assert 0 <= tip["left"] and tip["right"] <= width
    hover_chart(page, 1)

    # The admin's own theme, light or dark, with readable text and a visible line.
    body_fg, body_bg = colours(page, "#content")
    assert (luminance(body_bg) < 0.1) == (scheme == "dark")
    assert contrast(*colours(page, ".presence-chart-y span")) >= 4.5
    assert contrast(*colours(page, ".presence-chart-tip")) >= 4.5
    assert contrast(*colours(page, ".presence-chart-summary")) >= 4.5
    stroke = page.evaluate(
        "() => getComputedStyle(document.querySelector('.presence-chart polyline')).stroke"
    )
    assert contrast(stroke, body_bg) >= 3  # a graphic: WCAG's 3:1

    # The state in words beside the dot and the message; the emoji drawn, not an empty box.
    expect(bob.locator("td").nth(1)).to_have_text("Do not disturb")
    expect(bob.locator("td").nth(5)).to_have_text("🎧 Deep work")
    assert "Noto Emoji" in drawn_with(page, "tr.presence-row .presence-emoji")
    no_sideways_scrolling(page)
    shot(demo, page, "dashboard", scheme, width)


def test_a_new_install_draws_only_what_it_saw(demo, demo_server):
    demo_server.manage("shell", "-c", FRESH)  # as on the first minutes of an install
    page = demo.open("admin", DASHBOARD, width=PHONE)
    # The server's sweeper takes a sample twice a second: a dot or a short line at the right
    # (on this page, or on its next refresh, 5 s later).
    expect(page.locator(".presence-chart polyline")).to_have_count(1)
    line = page.locator(".presence-chart polyline").bounding_box()
    plot = page.locator(".presence-chart-plot").bounding_box()
    assert line["x"] > plot["x"] + plot["width"] * 0.95  # nothing drawn before it
    # Drawn even when it is one sample: two points (maybe the same) with round caps.
    points, cap = page.evaluate("""() => {
        const line = document.querySelector('.presence-chart polyline');
        return [line.points.numberOfItems, getComputedStyle(line).strokeLinecap]; }""")
    assert points >= 2 and cap == "round"
    expect(page.locator(".presence-chart polygon")).to_have_count(1)
    area = page.locator(".presence-chart polygon").bounding_box()
    assert area is None or area["x"] > plot["x"] + plot["width"] * 0.95  # no ramp
    expect(page.locator(".presence-chart-gap-label")).to_have_text("no samples")
    assert re.fullmatch(r"\d\d:\d\d · no sample", hover_chart(page, 12))
    no_sideways_scrolling(page)
    shot(demo, page, "dashboard-new-install", "light", PHONE)


def test_the_live_dashboard_refreshes_quietly(demo, history):
    page = demo.open("admin", DASHBOARD)
    # One live region, and it is empty: the body that refreshes every 5 s is not one.
    live = page.evaluate("""() => Array.from(document.querySelectorAll(
        '[aria-live], [role=status], [role=alert], [role=log]'), el => el.id)""")
    assert live == ["presence-refresh-note"]
    expect(page.locator("#presence-refresh-note")).to_have_text("")
    updated = page.locator(".presence-updated time")
    expect(updated).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
    first = updated.inner_text()

    # Focus on the chart, a value shown with the keyboard: a refresh keeps both.
    page.locator(".presence-chart-plot").focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator(".presence-chart-tip")).to_have_text(re.compile(r"· \d+ online$"))
    page.evaluate("() => { document.querySelector('.presence-chart-plot').kept = true; }")
    expect(updated).not_to_have_text(first)
    assert page.evaluate("() => document.activeElement.kept === true")  # the same node, focused
    expect(page.locator(".presence-chart-tip")).to_be_visible()
    expect(page.locator(".presence-chart-tip")).to_have_text(re.compile(r"· \d+ online$"))

    # The server gone: said once, in the live region; back: the note goes.
    page.route(re.compile(r"partial=1"), lambda route: route.abort())
    note = page.locator("#presence-refresh-note")
    expect(note).to_contain_text("Live updates paused")
    expect(note).to_be_visible()
    assert contrast(*colours(page, "#presence-refresh-note")) >= 4.5
    demo.screenshot(page, "dashboard-paused-light-desktop")
    page.unroute(re.compile(r"partial=1"))
    expect(note).to_have_text("")
    expect(note).to_be_hidden()


# -- the demo ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("scheme", "width"), LOOKS)
def test_the_room_page_fits_and_says_the_state(demo, scheme, width):
    a = demo.enter("alice", "lobby", width=width, color_scheme=scheme)
    b = demo.enter("bob", "lobby")
    b.click('#status-form label.option:has(input[value="dnd"])')
    # bob's own echo of the change resets his picker, the message included: fill it in after.
    expect(b.locator("#status-note")).to_have_text("Everybody sees you as do not disturb.")
    # An emoji suggests its message only over an empty one (or its own suggestion): another
    # test of the module may have left bob a message.
    b.fill("#status-message", "")
    b.click('#status-form label.emoji[title="In a meeting"]')
    b.click("#status-form button[type=submit]")

    # Red for do not disturb, and the words too: a red-green colour-blind person reads them.
    bob = a.locator('#here .member[data-name="bob"]')
    expect(bob.locator("[data-status]")).to_have_text("Do not disturb · 📅 In a meeting")
    status = boxes(a, '#here .member[data-name="bob"] [data-status]')[0]
    assert status["right"] <= width and status["width"] > 100
    expect(bob.locator(".presence-dot")).to_have_attribute(
        "aria-label", "Do not disturb: 📅 In a meeting"
    )

    # No colour-emoji font here: every emoji is drawn by presence_app's monochrome fallback
    # (Noto Emoji), none as an empty box of the text font.
    a.evaluate("() => document.fonts.ready.then(() => null)")
    for selector in [
        *(f".emoji-options label:nth-of-type({i}) span" for i in range(2, 8)),
        '#here .member[data-name="bob"] [data-status]',
    ]:
        # Text laid out before the font arrived keeps its first font until it is laid out
        # again: lay it out anew (as any change to the page would) and look again.
        deadline = time.monotonic() + 20
        while "Noto Emoji" not in (fonts := drawn_with(a, selector)):
            assert time.monotonic() < deadline, (selector, fonts)
            a.wait_for_timeout(200)
            a.evaluate(RELAYOUT, selector)

    # The top bar fits: every piece of it inside the viewport, "Log out" too.
    for piece in boxes(a, ".topbar *"):
        assert 0 <= piece["left"] and piece["right"] <= width, piece
    logout = a.get_by_role("button", name="Log out")
    expect(logout).to_be_in_viewport()
    # alice is no staff: no link to a dashboard she may not open.
    expect(a.locator('a[href*="/admin/"]')).to_have_count(0)
    assert contrast(*colours(a, ".topnav a")) >= 4.5
    assert contrast(*colours(a, '#here .member[data-name="bob"] .status')) >= 4.5
    assert contrast(*colours(a, ".connection")) >= 4.5
    _, page_bg = colours(a, "main")
    assert (luminance(page_bg) < 0.1) == (scheme == "dark")
    no_sideways_scrolling(a)
    shot(demo, a, "room", scheme, width)


@pytest.mark.parametrize("width", [1280, PHONE])
def test_staff_get_the_dashboard_link(demo, width):
    page = demo.open("admin", "/", width=width)
    link = page.locator(".topnav").get_by_role("link", name="Dashboard")
    expect(link).to_have_attribute("href", DASHBOARD)
    expect(link).to_be_in_viewport()
    expect(page.get_by_role("button", name="Log out")).to_be_in_viewport()
    for piece in boxes(page, ".topbar *"):
        assert 0 <= piece["left"] and piece["right"] <= width, piece
    no_sideways_scrolling(page)
    shot(demo, page, "rooms-staff", "light", width)
    link.click()
    expect(page).to_have_url(re.compile(re.escape(DASHBOARD) + "$"))
    expect(page.locator(".presence-chart")).to_be_visible()
    shot(demo, page, "dashboard-from-demo", "light", width)


def test_the_dashboard_follows_the_admins_own_theme_switch(demo, history):
    # The admin's theme button wins over the system's preference (localStorage "theme").
    page = demo.open("admin", DASHBOARD, color_scheme="light")
    page.evaluate("() => localStorage.setItem('theme', 'dark')")
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    _, background = colours(page, "#content")
    assert luminance(background) < 0.1
    assert contrast(*colours(page, ".presence-chart-y span")) >= 4.5
    assert contrast(*colours(page, ".presence-count-label")) >= 4.5
    gap_fill, _ = colours(page, ".presence-chart-gap", "fill")
    assert luminance(gap_fill) < 0.1  # the shaded gaps are dark too
