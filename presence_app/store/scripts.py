"""The Lua scripts: one per state change or read, each ``head.lua`` (the keys, the clock, the
timers) + the shared library ``lib.lua`` + its own body (lua/); the scripts that read users'
presences also take ``read.lua`` (get_many's read, as a function)."""

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
    "idle",
    "join",
    "leave",
    "online",
    "room",
    "roomstate",
    "set_status",
    "sweep",
    "touch",
)

#: Reads that need only head.lua (the keys and the clock), not the library: every call of a
#: script runs its whole prelude.
READS = {"get_many"}
#: The scripts that read presences with read.lua's ``read_many``: get_many, and set_status,
#: which answers with its user's state after its write.
READERS = {"get_many", "set_status"}
#: The scripts that change nothing: safe to run again (after NOSCRIPT, a read that ran before a
#: write it came after is read again: sync.to_repeat).
READS_ONLY = {"get_many", "online", "room", "counts"}


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
    head, lib, read = _read("head"), _read("lib"), _read("read")
    scripts = {}
    for name in NAMES:
        parts = [head] if name in READS else [head, lib]
        if name in READERS:
            parts.append(read)
        scripts[name] = Script(name, "\n".join([*parts, _read(name)]))
    return scripts
