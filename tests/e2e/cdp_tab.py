"""A Chromium tab driven over the DevTools protocol alone, for what Playwright's pages cannot
do: be frozen. ``Page.setWebLifecycleState {"state": "frozen"}`` freezes a page as Chrome does
a background tab (no task runs: no timer, no event, no heartbeat) only on a page Playwright has
not attached to (its sessions keep the page visible and focused, and the call is then a no-op).

    with CdpTab(url, cookies=[...]) as tab:
        tab.evaluate("1 + 1")                    # Runtime.evaluate, promises awaited
        tab.wait_for("window.presence && presence.userId !== null")
        tab.freeze(); ...; tab.resume()

Its own headless Chromium (tests/browser.py's), on a free port, stopped on exit.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

from websockets.sync.client import connect

from presence_app.testing import free_port

from ..browser import ARGS, chromium_path


class CdpTab:
    def __init__(
        self, url: str, *, cookies: list[dict[str, Any]] = (), args: list[str] = ()
    ) -> None:
        self.url = url
        self.args = list(args)
        self.cookies = list(cookies)
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="presence-cdp-")
        self.process: subprocess.Popen | None = None
        self.ws: Any = None
        self.stack = contextlib.ExitStack()
        self.calls = 0

    def __enter__(self) -> CdpTab:
        self.process = subprocess.Popen(
            [
                chromium_path(),
                "--headless",
                *ARGS,
                *self.args,
                f"--remote-debugging-port={self.port}",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        targets: list[dict[str, Any]] = []
        while not targets:
            assert time.monotonic() < deadline, "Chromium's DevTools endpoint did not answer"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list") as r:
                    targets = [t for t in json.load(r) if t["type"] == "page"]
            except OSError:
                time.sleep(0.1)
        self.ws = self.stack.enter_context(
            connect(targets[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        )
        self.send("Page.enable")
        self.send("Network.enable")
        for cookie in self.cookies:
            self.send("Network.setCookie", cookie)
        self.send("Page.navigate", {"url": self.url})
        self.wait_for("document.readyState === 'complete'")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        """One command; its result (events that come meanwhile are passed over)."""
        self.calls += 1
        call = self.calls
        self.ws.send(json.dumps({"id": call, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.01, deadline - time.monotonic())))
            if reply.get("id") != call:
                continue
            if "error" in reply:
                raise RuntimeError(f"{method}: {reply['error']}")
            return reply["result"]

    def evaluate(self, expression: str, timeout: float = 30) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"!!({expression})"):
            assert time.monotonic() < deadline, f"not within {timeout} s: {expression}"
            time.sleep(0.05)

    def freeze(self) -> None:
        self.send("Page.setWebLifecycleState", {"state": "frozen"})

    def resume(self) -> None:
        self.send("Page.setWebLifecycleState", {"state": "active"})
