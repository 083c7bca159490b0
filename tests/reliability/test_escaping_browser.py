"""A status message (and emoji, and username) made of HTML is shown as text, in a real browser
(headless Chromium through Playwright), on the demo's room page and on the admin's dashboard
and LastSeen list, served by a real uvicorn: no script runs, no element is injected."""

from __future__ import annotations

import pytest

from tests.browser import SKIP_REASON, launch, skip_browser

from .clients import Client
from .conftest import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(120),
    pytest.mark.skipif(skip_browser(), reason=SKIP_REASON),
]

MESSAGE = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
EMOJI = "<svg onload=window.__xss=3>"
NAME = "<img src=x onerror=window.__xss=4>"
#: Nothing on these pages may carry an inline handler or be an injected image or svg.
INJECTED = "document.querySelectorAll('[onerror], [onload], img[src=\"x\"], svg[onload]').length"


@pytest.fixture
async def browser():
    """Headless Chromium (tests/browser.py: PRESENCE_CHROMIUM, PRESENCE_SKIP_BROWSER)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        chromium = await launch(playwright)
        yield chromium
        await chromium.close()


async def page_for(browser, server, user, dialogs: list[str]):
    context = await browser.new_context()
    await context.add_cookies([{"name": "sessionid", "value": user.session, "url": server.url}])
    page = await context.new_page()
    page.set_default_timeout(20_000)  # waits end when the page shows it: long ones cost nothing
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    return page


async def assert_inert(page, dialogs: list[str]) -> None:
    assert await page.evaluate("window.__xss") is None
    assert await page.evaluate(INJECTED) == 0
    assert dialogs == []


async def test_html_in_a_status_is_text_in_the_room_page_and_the_admin(db, servers, store, browser):
    users = db.users(["mallory", NAME, "viewer"]) | db.users(
        ["root"], is_superuser=True, is_staff=True
    )
    server = await servers.astart()
    mallory, named = [await Client(server, users[n]).connect() for n in ("mallory", NAME)]
    for client in (mallory, named):
        client.beat(1.0)
        await client.join("lobby")
    await mallory.send(type="status", state="dnd", message=MESSAGE, emoji=EMOJI)
    await mallory.wait_for("presence.update", self=True, message=MESSAGE)
    dialogs: list[str] = []

    # The room page, as another user: the server renders it, presence.js and room.js fill it.
    page = await page_for(browser, server, users["viewer"], dialogs)
    await page.goto(f"{server.url}/rooms/lobby/")
    status = f'.member[data-user="{mallory.id}"] [data-status]'
    await page.wait_for_function(
        "([sel, text]) => document.querySelector(sel)?.textContent === text",
        arg=[status, f"Do not disturb · {EMOJI} {MESSAGE}"],
    )
    dot = f'#here .member[data-user="{mallory.id}"] [data-presence-user]'
    assert await page.get_attribute(dot, "title") == f"Do not disturb: {EMOJI} {MESSAGE}"
    name = f'.member[data-user="{named.id}"] .name'
    assert (await page.text_content(name)).startswith(NAME)
    await assert_inert(page, dialogs)

    # The admin's dashboard, as a superuser, also after its live refresh (parsed in a template).
    admin = await page_for(browser, server, users["root"], dialogs)
    await admin.goto(f"{server.url}/admin/presence_app/lastseen/dashboard/")
    row = f'tr.presence-row[data-user="{mallory.id}"]'
    assert f"{EMOJI} {MESSAGE}" in await admin.text_content(row)
    assert NAME in await admin.text_content(f'tr.presence-row[data-user="{named.id}"]')
    await assert_inert(admin, dialogs)
    async with admin.expect_response(lambda r: "partial=1" in r.url):
        await admin.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    await admin.wait_for_selector(row)
    assert f"{EMOJI} {MESSAGE}" in await admin.text_content(row)
    await assert_inert(admin, dialogs)

    # The LastSeen list's live status column: mallory has a row once she went offline once.
    await mallory.close()
    await eventually(lambda: store.get(mallory.id).state == "offline", 30, "mallory offline")
    await mallory.connect()
    mallory.beat(1.0)  # online while a loaded machine renders the pages below
    await admin.goto(f"{server.url}/admin/presence_app/lastseen/")
    live = 'tr:has(a:text-is("mallory"))'
    await admin.wait_for_selector(live)
    assert f"Do not disturb: {EMOJI} {MESSAGE}" in await admin.text_content(live)
    await assert_inert(admin, dialogs)
    await named.close()
    await mallory.close()
    assert server.tracebacks() == 0
