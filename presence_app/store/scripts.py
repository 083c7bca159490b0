"""The Lua scripts: one per state change, each the shared prelude ``lib.lua`` + its own body."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

NAMES = (
    "activity",
    "connect",
    "counts",
    "disconnect",
    "forget",
    "get_many",
    "heartbeat",
    "join",
    "leave",
    "online",
    "room",
    "roomstate",
    "set_status",
    "sweep",
    "touch",
    "upgrade_v1",
)


class Script:
    """A script's source and SHA-1, for EVALSHA with a fallback to loading it (NOSCRIPT)."""

    def __init__(self, name: str, source: str) -> None:
        self.name = name
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()


def _read(name: str) -> str:
    return resources.files(__package__).joinpath("lua", f"{name}.lua").read_text()


@cache
def load() -> dict[str, Script]:
    lib = _read("lib")
    return {name: Script(name, f"{lib}\n{_read(name)}") for name in NAMES}
