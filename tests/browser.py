"""The browser the end-to-end tests drive: Debian's Chromium through Playwright.

``PRESENCE_CHROMIUM`` names another browser; ``PRESENCE_SKIP_BROWSER=1`` leaves these tests out.
Without a browser (and without that switch) the tests fail with what to install.
"""

from __future__ import annotations

import os

import pytest

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# Headless as root on a machine whose network reaches nothing: no sandbox, no background calls.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SKIP_REASON = "PRESENCE_SKIP_BROWSER is set: the browser tests are left out"
#: Milliseconds a wait for a page to show something lasts unless it says otherwise (an
#: ``expect``, a page's actions and waits): each ends when the page shows it, so a long one
#: costs a passing test nothing, and a loaded machine may take seconds (Playwright's own default
#: for an ``expect`` is 5 s).
SHOWN_WITHIN = 20_000


def skip_browser() -> bool:
    return os.environ.get("PRESENCE_SKIP_BROWSER", "") not in ("", "0")


def chromium_path() -> str:
    wanted = os.environ.get("PRESENCE_CHROMIUM")
    for path in [wanted] if wanted else CANDIDATES:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    where = wanted or " or ".join(CANDIDATES)
    pytest.fail(
        f"No Chromium at {where} for the browser tests. Install it: `apt-get install chromium` "
        "(`make test` does on Debian), or set PRESENCE_CHROMIUM=/path/to/chrome, or set "
        "PRESENCE_SKIP_BROWSER=1 to leave the browser tests out.",
        pytrace=False,
    )


def launch(playwright):
    """A headless Chromium from a started Playwright."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=ARGS)
