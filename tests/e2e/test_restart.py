"""A server restart under open pages, in headless Chromium against a real uvicorn: the pages
come back on the WebSocket (not on SSE, which presence.js keeps for proxies that never let a
WebSocket through), re-join their room, and the project's own frames (the demo's chat,
``client.send()``) go through again. Once after a deploy (SIGTERM: uvicorn closes the sockets
with 1012), once after a crash (SIGKILL: no close frame at all)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ..servers import AsgiServer, Database

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ROOM = "random"  # one of the demo's rooms (this test's server has its own keys)
#: presence.js' backoff doubles from 0.5-1 s up to 30 s: a few attempts fit in this.
BACK_WITHIN_MS = 60_000

# Every close and open the page's client reports, kept on the page.
RECORD = """() => {
    window.seen = [];
    presence.on("close", (e) => seen.push(["close", e.code, e.reconnectIn, presence.transport]));
    presence.on("open", () => seen.push(["open", null, null, presence.transport]));
}"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[AsgiServer, dict[str, Any]]]:
    from django.conf import settings

    db = Database(
        tmp_path / "db.sqlite3",
        settings="tests.e2e.settings",
        env={
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_E2E_PREFIX": f"restart-{uuid.uuid4().hex[:8]}",
        },
    ).migrate()
    users = db.users(["alice", "bob"])
    asgi = AsgiServer(db, name="restart", log_dir=tmp_path)
    asgi.start()
    yield asgi, users
    asgi.stop()


def open_room(browser: Any, server: AsgiServer, user: Any, query: str = "") -> Any:
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": user.session, "url": server.url}])
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{server.url}/rooms/{ROOM}/{query}")
    page.wait_for_function(
        "room => window.presence && presence.transport === 'websocket'"
        " && presence.members(room).some(m => m.user === presence.userId)",
        arg=ROOM,
    )
    page.evaluate(RECORD)
    return page


def chat(sender: Any, receiver: Any, text: str) -> None:
    """``sender`` writes ``text`` in the room's chat (a frame of the demo's own, on its socket);
    ``receiver`` shows it."""
    sender.fill("#composer-input", text)
    sender.press("#composer-input", "Enter")
    expect(receiver.locator("#messages .message", has_text=text)).to_have_count(1)


def restart(server: AsgiServer, pages: list[Any], how: str) -> None:
    """Stops the server (``how``: "stop", a deploy's SIGTERM, or "kill", a crash), lets every
    page meet it down (a reconnect attempt failed: two closes), and starts it again on its
    port."""
    closes = "() => seen.filter(e => e[0] === 'close').length"
    before = [page.evaluate(closes) for page in pages]
    getattr(server, how)()
    for page, n in zip(pages, before, strict=True):
        page.wait_for_function(f"n => ({closes})() >= n + 2", arg=n, timeout=BACK_WITHIN_MS)
    server.start()


@pytest.mark.parametrize("shared", ["worker", None], ids=["shared", "own"])
def test_a_restart_keeps_the_pages_on_the_websocket(browser, server, shared):
    """``shared``: the tab's connection is the SharedWorker's (the default), or its own
    (``?share=0``)."""
    asgi, users = server
    query = "" if shared else "?share=0"
    a = open_room(browser, asgi, users["alice"], query)
    b = open_room(browser, asgi, users["bob"], query)
    try:
        a.wait_for_function("room => presence.members(room).length === 2", arg=ROOM)
        chat(a, b, "before the deploy")

        for round, how in enumerate(["stop", "kill"], start=1):
            restart(asgi, [a, b], how)
            for page in (a, b):
                # Back on a socket: a new hello, the room joined again.
                page.wait_for_function(
                    "n => seen.filter(e => e[0] === 'open').length >= n",
                    arg=round,
                    timeout=BACK_WITHIN_MS,
                )
                page.wait_for_function(
                    "room => presence.members(room).length === 2", arg=ROOM, timeout=15_000
                )
                assert page.evaluate("presence.transport") == "websocket", page.evaluate("seen")
                assert page.evaluate("presence.shared") == shared
                if not shared:
                    assert page.evaluate("presence.socket instanceof WebSocket")
                # Never went over to SSE on the way: every close and open was the socket's.
                assert {e[3] for e in page.evaluate("seen")} == {"websocket"}
            # The demo's chat frames (client.send()) go through on the new sockets.
            chat(a, b, f"after restart {round}, from alice")
            chat(b, a, f"after restart {round}, from bob")
        assert asgi.tracebacks() == 0, asgi.log()
    finally:
        for page in (a, b):
            page.context.close()
