"""The Lua scripts: one per state change, each the shared prelude ``lib.lua`` + its own body
(+ a body both layouts share, ``SHARED``)."""

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


#: Layout 3's scripts (lua3/, the default layout: docs/store-layout-3.md), named "3/<name>".
NAMES_3 = (
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
    "upgrade_v2",
)


def _read(name: str, folder: str = "lua") -> str:
    return resources.files(__package__).joinpath(folder, f"{name}.lua").read_text()


#: Layout-3 reads that need only head.lua (the keys and the clock), not the library: every
#: call of a script runs its whole prelude.
READS_3 = {"get_many"}

#: Bodies both layouts share, after a script's own part (which defines what they use).
SHARED = {"roomstate": "roomstate_ops"}


def _body(name: str, folder: str) -> str:
    own = _read(name, folder)
    return f"{own}\n{_read(SHARED[name])}" if name in SHARED else own


@cache
def load() -> dict[str, Script]:
    lib = _read("lib")
    scripts = {name: Script(name, f"{lib}\n{_body(name, 'lua')}") for name in NAMES}
    head3, lib3 = _read("head", "lua3"), _read("lib", "lua3")
    for name in NAMES_3:
        lib = "" if name in READS_3 else f"{lib3}\n"
        scripts[f"3/{name}"] = Script(f"3/{name}", f"{head3}\n{lib}{_body(name, 'lua3')}")
    return scripts
