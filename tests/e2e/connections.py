"""What the server's store holds of a user's connections, for the browser tests of the shared
connection (tabs that share one, a sign-out that ends a session's)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..servers import Database

#: Seconds a wait for something a page or the store shows may take on a loaded machine (each
#: ends on it).
WITHIN = 20


def connections(db: Database, user: Any) -> list[str]:
    """The user's connections as the server's store holds them."""
    out = json.loads(db.manage("presence", "export", str(user.id)))
    return [c for space in out["workspaces"].values() for c in space.get("connections", [])]


def wait_until(what: Any, check: Any, timeout: float = WITHIN) -> Any:
    """``what()`` once ``check`` holds of it, polled; fails past ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if check(value):
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {value!r}"
        time.sleep(0.2)
