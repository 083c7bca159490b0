"""End-to-end set-up: the demo project served by uvicorn (a subprocess) on the test run's Redis
and a temporary SQLite file, and headless Chromium (Debian's) driven by Playwright.

Chromium: ``PRESENCE_CHROMIUM``, else ``/usr/bin/chromium``; ``PRESENCE_SKIP_BROWSER=1`` leaves
these tests out. Screenshots go to ``artifacts/e2e/`` (ignored by git), also for failed tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from presence_app.testing import free_port

from ..browser import SHOWN_WITHIN, SKIP_REASON, chromium_path, launch, skip_browser
from ..servers import listening
from ..users import login_name
from .settings import TIMERS

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTIFACTS = ROOT / "artifacts" / "e2e"
VIEWPORT = {"width": 1280, "height": 860}
PASSWORDS = {"admin": "presence-admin"}  # everybody else: the demo password


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not skip_browser():
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    # Kept on the item, so that fixtures can tell a failed test (and screenshot its pages).
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


# -- the server -------------------------------------------------------------------------------
class DemoServer:
    """The demo under uvicorn on a free port, with a freshly migrated SQLite file."""

    def __init__(self, workdir: Path) -> None:
        from django.conf import settings

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "uvicorn.log"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.e2e.settings",
            "DJANGO_DB": str(workdir / "db.sqlite3"),
            # tests/settings.py started the run's Redis and exported it; be explicit anyway.
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_E2E_PREFIX": f"e2e-{uuid.uuid4().hex[:8]}",
            "PYTHONUNBUFFERED": "1",
        }
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> None:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode:
            pytest.fail(
                f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}", pytrace=False
            )

    def start(self, timeout: float = 60) -> DemoServer:
        """Migrates, then serves; returns once it answers on a socket of its own (the port
        free_port() chose may be another process's by then: tests/servers.py, AsgiServer.start):
        a server that finds its port taken starts again on another."""
        self.manage("migrate", "--noinput", "--verbosity", "0")
        self.manage("demo_users")
        for _ in range(5):
            if self._serve(timeout):
                return self
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
        pytest.fail(f"uvicorn found its port taken five times:\n{self.log()}", pytrace=False)

    def _serve(self, timeout: float) -> bool:
        """False when uvicorn exited because its port was taken."""
        log = open(self.log_path, "ab")  # the child keeps its own copy of the descriptor
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "project.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--lifespan",
                "off",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "address already in use" in self.log():
                    return False
                pytest.fail(f"uvicorn exited:\n{self.log()}", pytrace=False)
            if not listening(self.process.pid, self.port):
                time.sleep(0.1)
                continue
            try:
                with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=1) as reply:
                    if reply.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        pytest.fail(
            f"uvicorn did not answer on {self.url} within {timeout} s:\n{self.log()}", pytrace=False
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


@pytest.fixture(scope="package")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    server = DemoServer(tmp_path_factory.mktemp("e2e")).start()
    yield server
    server.stop()


# -- the browser ------------------------------------------------------------------------------
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    chromium_path()  # fails with what to install before Playwright starts
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=SHOWN_WITHIN)
    playwright = sync_playwright().start()
    try:
        chromium = launch(playwright)
    except Exception:
        playwright.stop()
        raise
    yield chromium
    chromium.close()
    playwright.stop()


class Demo:
    """Pages of the demo, one browser context (one "person") each: ``open(user, path)``.

    Each user logs in once through the login form; later contexts reuse the session cookie.
    """

    def __init__(self, browser: Any, server: DemoServer, sessions: dict[str, Any]) -> None:
        self.browser = browser
        self.server = server
        self.sessions = sessions
        self.pages: list[Any] = []

    def context(
        self, user: str | None = None, *, width: int | None = None, color_scheme: str = "light"
    ) -> Any:
        state = self.login(user) if user else None
        viewport = {**VIEWPORT, "width": width} if width else VIEWPORT
        return self.browser.new_context(
            viewport=viewport,
            storage_state=state,
            reduced_motion="reduce",
            color_scheme=color_scheme,
        )

    def login(self, user: str) -> Any:
        if user not in self.sessions:
            from project.demo.users import DEMO_PASSWORD

            context = self.browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            page.goto(f"{self.server.url}/accounts/login/")
            page.fill("#id_username", login_name(user))
            page.fill("#id_password", PASSWORDS.get(user, DEMO_PASSWORD))
            page.click(".login-card button.primary")
            page.wait_for_url(f"{self.server.url}/")
            self.sessions[user] = context.storage_state()
            context.close()
        return self.sessions[user]

    def open(self, user: str | None, path: str, **context: Any) -> Any:
        """``user``'s page at ``path``; ``width`` and ``color_scheme`` as ``context``'s."""
        page = self.context(user, **context).new_page()
        page.set_default_timeout(SHOWN_WITHIN)
        self.pages.append(page)
        page.goto(self.server.url + path)
        return page

    def enter(self, user: str, room: str, **context: Any) -> Any:
        """``user``'s page of ``room``, once its socket has joined (the room's snapshot came)."""
        page = self.open(user, f"/rooms/{room}/", **context)
        page.wait_for_function(
            "room => window.presence"
            " && presence.members(room).some(m => m.user === presence.userId)",
            arg=room,
        )
        return page

    def screenshot(self, page: Any, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    def close(self, failed_test: str | None) -> None:
        for i, page in enumerate(self.pages):
            if page.is_closed():
                continue
            if failed_test:
                try:
                    self.screenshot(page, f"failed-{failed_test}-{i}")
                except Exception:  # a screenshot must not hide the test's own failure
                    pass
            try:
                # Back to plain "online" and out of the rooms right away (no grace), so the
                # next test starts from a clean room and status.
                page.evaluate("""() => {
                    if (!window.presence || !presence.socket) return;
                    for (const room of Array.from(presence.rooms)) presence.leave(room);
                    const me = presence.me || {};
                    if (me.state === "dnd" || me.state === "invisible" || me.message || me.emoji)
                        presence.setStatus({state: "online", message: "", emoji: ""});
                }""")
                page.wait_for_function(
                    """() => !window.presence || !presence.socket
                    || (presence.queue.length === 0 && presence.socket.bufferedAmount === 0)""",
                    timeout=2000,
                )
            except Exception:
                pass
            page.context.close()
        self.pages.clear()


@pytest.fixture(scope="package")
def sessions() -> dict[str, Any]:
    return {}


@pytest.fixture
def demo(
    request: pytest.FixtureRequest, browser: Any, demo_server: DemoServer, sessions: dict[str, Any]
) -> Iterator[Demo]:
    helper = Demo(browser, demo_server, sessions)
    yield helper
    report = getattr(request.node, "report_call", None)
    failed = report is not None and report.failed
    if failed:
        print(f"--- uvicorn log (tail) ---\n{demo_server.log()}")
    helper.close(request.node.name if failed else None)


@pytest.fixture(scope="session")
def timers() -> dict[str, float]:
    return dict(TIMERS)
