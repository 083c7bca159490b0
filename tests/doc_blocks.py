"""The code blocks of a Markdown page, as a reader copies them: tests that follow a page
(installation.md, testing.md) take their code from the page itself at test time, so the page
cannot say one thing while the test does another."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


def code_blocks(page: str, language: str | None = None) -> list[str]:
    """The fenced blocks of ``docs/<page>`` in order (of ``language`` only, if given)."""
    text = (DOCS / page).read_text()
    return [body for lang, body in FENCE.findall(text) if language in (None, lang)]


def files_of(page: str) -> dict[str, list[tuple[str, str]]]:
    """The Python blocks of ``page`` that name a file on their first line: ``# mysite/asgi.py``
    (the whole file) or ``# mysite/settings.py, at the end`` (added to its end). {path:
    [(how, block), ...]} with how "replace" or "append", in the page's order."""
    found: dict[str, list[tuple[str, str]]] = {}
    for block in code_blocks(page, "python"):
        first = block.split("\n", 1)[0]
        named = re.fullmatch(r"# ([\w/]+\.py)(, at the end)?", first.strip())
        if named:
            how = "append" if named.group(2) else "replace"
            found.setdefault(named.group(1), []).append((how, block))
    return found
