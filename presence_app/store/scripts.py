"""The Lua scripts: one per state change or read, each ``head.lua`` (the keys, the clock, the
timers) + the part of the shared library ``lib.lua`` it uses + its own body (lua/); the scripts
that read users' presences also take ``read.lua`` (get_many's read, as a function).

Every call of a script runs its whole top-level code, so a script takes of ``lib.lua`` only the
definitions it uses (issue 43: defining all of the library's ~50 closures cost a join about as
much as 89165fe's whole join): ``lib_parts`` cuts the library into its top-level statements and
``pick`` keeps those that the script's other parts name, transitively, in the library's order.
"""

from __future__ import annotations

import hashlib
import re
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

#: The reads that take nothing of the library (head.lua, read.lua, get_many.lua): bench tools
#: that rebuild the older layouts name them.
READS = {"get_many"}
#: The line after which a script's own part needs the whole library: what comes before it (a
#: quick answer) runs after head.lua and only the library's definitions it names (load).
LIBRARY = "-- (the library)\n"
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


# -- the library's top-level statements ---------------------------------------------------------
#: A top-level statement of lib.lua starts at column 0 with one of these: ``local function f``,
#: ``local a, b = ...`` (it defines f, or a and b) or ``f = ...`` (it gives a value to a local
#: defined before: it goes wherever f goes). The statement runs on to the next start; the
#: column-0 comments just before a start are the next statement's. Any other line at column 0
#: must be blank, a comment or a closing line (``end``, ``}``, ``)``): anything else (a
#: top-level ``if``, ``for``, a call) is refused, as a statement that defines nothing.
_START = re.compile(
    r"^(?:local\s+function\s+(?P<fn>[A-Za-z_]\w*)"
    r"|local\s+(?P<names>[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*="
    r"|(?P<set>[A-Za-z_]\w*)\s*=(?!=))"
)
_CLOSING = re.compile(r"^(?:end\b|[})])")
#: Lua's tokens as far as names go: comments, strings and numbers are passed over, and a name
#: after ``.`` or ``:`` is a field, not a variable (``..`` is concatenation); so is a name before
#: ``=`` in a table constructor (``{a = 1}``), told by the brackets and blocks open around it.
#: Long brackets (``[[ ]]``, ``--[[ ]]``) are not read: lib.lua must not hold any (lib_parts
#: refuses them).
_TOKEN = re.compile(
    r"--[^\n]*"
    r"|'(?:\\.|[^'\\\n])*'"
    r'|"(?:\\.|[^"\\\n])*"'
    r"|\.\.\.?"
    r"|[.:]\s*[A-Za-z_]\w*"
    r"|\d[\w.]*"
    r"|(?P<open>[{(\[])|(?P<close>[})\]])"
    r"|(?P<name>[A-Za-z_]\w*)(?P<key>\s*=(?!=))?"
)
#: The keywords that open a block closed by ``end`` (``while``/``for`` open theirs with ``do``;
#: ``repeat`` is closed by ``until``).
_BLOCK = {"function", "do", "if", "repeat"}
_KEYWORDS = {"and", "break", "else", "elseif", "false", "for", "in", "local", "nil", "not", "or",
             "return", "then", "true", "while"}  # fmt: skip


def names_in(text: str) -> set[str]:
    """The variable names ``text`` uses (a superset: a name its own locals shadow is in it)."""
    out: set[str] = set()
    stack: list[str] = []
    for m in _TOKEN.finditer(text):
        if m.group("open"):
            stack.append(m.group("open"))
        elif m.group("close"):
            if stack:
                stack.pop()
        elif name := m.group("name"):
            if name in _BLOCK:
                stack.append(name)
            elif name in ("end", "until"):
                if stack:
                    stack.pop()
            elif name in _KEYWORDS:
                pass
            elif not (m.group("key") and stack and stack[-1] == "{"):
                out.add(name)
    return out


class Part:
    """A top-level statement of lib.lua: the names it defines (``defines``) or gives a value
    to (``sets``), the names it uses, and its text."""

    def __init__(self, defines: tuple[str, ...], sets: str | None, text: str) -> None:
        self.defines, self.sets, self.text = defines, sets, text
        body = text.split("=", 1)[1] if sets else text
        self.uses = names_in(body) - set(defines)


def lib_parts(lib: str) -> list[Part]:
    """lib.lua cut into its top-level statements (``_START``), in order."""
    if "[[" in lib or "[=" in lib:
        raise ValueError("lib.lua: long brackets are not read by scripts.lib_parts")
    parts: list[Part] = []
    current: list[str] = []  # the statement being read
    comments: list[str] = []  # column-0 comments since its last line
    head: tuple[tuple[str, ...], str | None] | None = None

    def close() -> None:
        if head is not None:
            parts.append(Part(head[0], head[1], "\n".join(current)))

    for n, line in enumerate(lib.splitlines(), 1):
        start = _START.match(line)
        if start:
            close()
            if start.group("fn"):
                head = ((start.group("fn"),), None)
            elif start.group("names"):
                head = (tuple(x.strip() for x in start.group("names").split(",")), None)
            else:
                head = ((), start.group("set"))
            current, comments = [*comments, line], []
        elif not line.strip() or line.startswith("--"):
            comments.append(line)
        elif line[0].isspace() or _CLOSING.match(line):
            if head is None:
                raise ValueError(f"lib.lua:{n}: a line before the first definition: {line!r}")
            current.extend(comments)
            current.append(line)
            comments = []
        else:
            raise ValueError(f"lib.lua:{n}: a top-level statement that is no definition: {line!r}")
    close()
    defined = [name for p in parts for name in p.defines]
    if len(defined) != len(set(defined)):
        raise ValueError("lib.lua: a name defined twice")
    for p in parts:
        if p.sets and p.sets not in defined:
            raise ValueError(f"lib.lua: {p.sets} is given a value but defined nowhere before")
    return parts


def picked(parts: list[Part], text: str) -> set[int]:
    """The indexes (in ``parts``) of the library's statements that ``text`` needs: those
    defining a name it uses, and what they use in turn, and the statements giving a value to
    any of them."""
    by_name = {name: i for i, p in enumerate(parts) for name in p.defines}
    setters: dict[str, list[int]] = {}
    for i, p in enumerate(parts):
        if p.sets:
            setters.setdefault(p.sets, []).append(i)
    keep: set[int] = set()
    todo = list(names_in(text))
    while todo:
        name = todo.pop()
        for i in ([by_name[name]] if name in by_name else []) + setters.get(name, []):
            if i not in keep:
                keep.add(i)
                todo.extend(parts[i].uses)
    return keep


def pick(parts: list[Part], text: str, without: set[int] = frozenset()) -> str:
    """The library's statements that ``text`` (the script's other parts) needs (``picked``), in
    the library's order, but those in ``without`` (already defined before)."""
    keep = picked(parts, text) - without
    return "\n".join(p.text for i, p in enumerate(parts) if i in keep)


@cache
def load(path: str = "both") -> dict[str, Script]:
    """The scripts. Tests compare an early part (before LIBRARY) with the full path: ``path=
    "full"`` tells each early part that says ``local EARLY = true`` not to answer (the full path
    does every call), ``path="early"`` makes the full path of such a script an error (a call
    that goes through answered early)."""
    head, read = _read("head"), _read("read")
    parts = lib_parts(_read("lib"))
    scripts = {}
    for name in NAMES:
        own = [read, _read(name)] if name in READERS else [_read(name)]
        # a script's part before LIBRARY runs before the rest of the library's definitions: only
        # those it names itself (and what they use) come before it
        first, _, rest = own[-1].rpartition(LIBRARY)
        if first and path == "full":
            first = first.replace("local EARLY = true\n", "local EARLY = false\n")
        if first and path == "early" and "local EARLY = true\n" in first:
            rest = "error('PRESENCE the full path')\n" + rest
        ahead = picked(parts, first) if first else set()
        before = [pick(parts, first), first] if first else []
        own[-1] = rest if first else own[-1]
        lib = pick(parts, "\n".join([first, *own]), ahead)
        parts_ = [head, *before, *([lib] if lib else []), *own]
        scripts[name] = Script(name, "\n".join(x for x in parts_ if x))
    return scripts
