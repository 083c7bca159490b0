"""docs/howto-existing-channels-app.md, followed: the project of Channels' tutorial with presence
added (tests/tutorial_project/: the files the how-to includes), served by daphne's runserver as
the tutorial serves it, on the UUID-and-email user model. Two users log in through Django's
LoginView, enter the chat room, see each other's dot turn green, chat, and see each other leave;
presence.js and presence.css come from the static files the server serves."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from ..browser import SHOWN_WITHIN
from ..servers import ROOT, AsgiServer, Database
from .test_demo import has_class

pytestmark = pytest.mark.e2e

TUTORIAL = ROOT / "tests" / "tutorial_project"
PASSWORD = "tutorial-pw"


@pytest.fixture(scope="module")
def tutorial_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Database, dict]:
    from django.conf import settings

    db = Database(
        tmp_path_factory.mktemp("tutorial") / "db.sqlite3",
        settings="mysite.suite_settings",
        env={
            "PYTHONPATH": f"{TUTORIAL}{os.pathsep}{ROOT}",  # the tutorial's apps are top-level
            "REDIS_URL": settings.REDIS_URL,
        },
    ).migrate()
    db.manage("check", "--fail-level", "WARNING")  # presence's system checks pass too
    return db, db.users(["alice", "bob"], password=PASSWORD)


#: How the how-to serves the project in development, static files included: daphne's runserver
#: (the tutorial's way), and uvicorn on asgi.py's ASGIStaticFilesHandler.
SERVERS = {
    "runserver": {"server": "runserver", "manage": str(TUTORIAL / "manage.py")},
    "uvicorn": {"server": "uvicorn", "app": "mysite.asgi:application"},
}


@pytest.fixture(params=list(SERVERS))
def tutorial(
    request: pytest.FixtureRequest, tutorial_db: tuple[Database, dict]
) -> Iterator[tuple[AsgiServer, dict]]:
    db, users = tutorial_db
    prefix = {"PRESENCE_KEY_PREFIX": f"tutorial-{uuid.uuid4().hex[:8]}"}  # a fresh presence
    server = AsgiServer(db, env=prefix, name=f"tutorial-{request.param}", **SERVERS[request.param])
    server.start()
    yield server, users
    server.stop()


def login(browser: Any, server: AsgiServer, email: str, path: str) -> Any:
    """A page of ``email``'s, logged in through the login form ``@login_required`` sent it to."""
    page = browser.new_context().new_page()  # a browser of its own: no cookies of another
    page.set_default_timeout(SHOWN_WITHIN)
    page.goto(server.url + path)
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next="))
    page.fill("#id_username", email)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(server.url + path)
    return page


def dot(page: Any, email: str) -> Any:
    return page.locator(f'#people li[data-name="{email}"] .presence-dot')


def test_two_users_see_each_other_and_chat_in_the_tutorial_room(browser, tutorial):
    server, users = tutorial
    alice, bob = "alice@example.com", "bob@example.com"
    # The static files are served (in development, DEBUG): presence.js and its CSS.
    for path in ("/static/presence_app/presence.js", "/static/presence_app/css/presence.css"):
        assert server.get(path)[0] == 200, server.log()

    a = login(browser, server, alice, "/chat/lobby/")
    a.wait_for_function("() => window.Presence && window.presence && presence.userId")
    assert a.evaluate("presence.userId") == users["alice"].id  # a UUID
    b = login(browser, server, bob, "/chat/lobby/")
    # Each sees the other's dot turn green, and two in the room.
    expect(dot(a, bob)).to_have_class(has_class("presence-online"))
    expect(dot(b, alice)).to_have_class(has_class("presence-online"))
    expect(a.locator('[data-presence-room-count="lobby"]')).to_have_text("2")
    assert a.evaluate("presence.members('lobby').map(m => m.user).sort()") == sorted(
        [users["alice"].id, users["bob"].id]
    )

    # The tutorial's chat still works, on the same socket.
    a.fill("#chat-message-input", "hello bob")
    a.click("#chat-message-submit")
    expect(b.locator("#chat-log")).to_have_value("hello bob\n")
    b.fill("#chat-message-input", "hi alice")
    b.press("#chat-message-input", "Enter")
    expect(a.locator("#chat-log")).to_have_value("hello bob\nhi alice\n")

    # bob closes his tab: alice sees him leave the room after the grace, and go offline once
    # his last page view's online window ends too (1 s and 2 s in the test settings).
    b.context.close()
    expect(a.locator('[data-presence-room-count="lobby"]')).to_have_text("1")
    expect(dot(a, bob)).to_have_class(has_class("presence-offline"))
    a.context.close()
    assert server.tracebacks() == 0, server.log()
