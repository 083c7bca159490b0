"""docs/howto-existing-channels-app.md is followed by the suite: its code is the files of
tests/tutorial_project/ (which tests/e2e/test_tutorial.py serves and drives in a browser),
included with myst's ``{literalinclude}``, never copied into the page, so the two cannot drift."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..servers import ROOT, Database

DOCS = ROOT / "docs"
PAGE = DOCS / "howto-existing-channels-app.md"
PROJECT = ROOT / "tests" / "tutorial_project"
INCLUDE = re.compile(r"^```\{literalinclude\} (\S+)\n((?::[a-z-]+:.*\n)*)```", re.M)
OPTION = re.compile(r"^:([a-z-]+): (.*)$", re.M)

#: What a reader writes or changes, each shown on the page.
SHOWN = {
    "chat/consumers.py",
    "chat/routing.py",
    "chat/views.py",
    "chat/templates/chat/room.html",
    "mysite/asgi.py",
    "mysite/urls.py",
    "mysite/settings.py",
}


def includes() -> list[tuple[Path, dict[str, str]]]:
    text = PAGE.read_text()
    return [
        ((DOCS / path).resolve(), {k: v.strip('"') for k, v in OPTION.findall(options)})
        for path, options in INCLUDE.findall(text)
    ]


def test_the_page_shows_the_project_s_files_by_inclusion():
    found = includes()
    assert {str(path.relative_to(PROJECT)) for path, _ in found} == SHOWN
    for path, options in found:
        text = path.read_text()
        start, end = options.get("start-after"), options.get("end-before")
        for marker in filter(None, (start, end)):
            assert text.count(marker) == 1, f"{path.name}: marker {marker!r}"
        if start and end:
            assert text.index(start) < text.index(end)
            assert text.split(start, 1)[1].split(end, 1)[0].strip()  # a section, not nothing


def test_no_code_of_the_project_is_copied_into_the_page():
    # Only shell commands are written out; every line of the project's code is included.
    fences = re.findall(r"^```(\S*)", PAGE.read_text(), re.M)
    languages = {f for f in fences if not f.startswith("{")} - {""}
    assert languages == {"sh"}


def test_the_page_is_in_the_documentation_s_table_of_contents():
    assert re.search(r"^howto-existing-channels-app$", (DOCS / "index.md").read_text(), re.M)


def test_collectstatic_collects_presence_js_for_production(tmp_path, settings):
    """Section 4's production step on the project: presence's files land in STATIC_ROOT."""
    db = Database(
        tmp_path / "db.sqlite3",
        settings="mysite.suite_settings",
        env={
            "PYTHONPATH": f"{PROJECT}{os.pathsep}{ROOT}",
            "REDIS_URL": settings.REDIS_URL,
            "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        },
    )
    db.manage("collectstatic", "--noinput", "--verbosity", "0")
    for name in ("presence.js", "css/presence.css"):
        assert (tmp_path / "static" / "presence_app" / name).is_file()
