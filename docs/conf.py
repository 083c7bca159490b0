"""Sphinx configuration: the documentation site (`nox -s docs`; CI treats warnings as errors)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# autodoc imports the app: a minimal Django configuration, no database or Redis needed.
import django  # noqa: E402
from django.conf import settings  # noqa: E402

settings.configure(
    INSTALLED_APPS=[
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.admin",
        "channels",
        "presence_app",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()

import presence_app  # noqa: E402
from presence_app.conf import DEFAULTS  # noqa: E402

project = "presence_app"
author = "presence_app contributors"
copyright = "presence_app contributors"
release = version = presence_app.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": True}
autodoc_typehints = "signature"
html_theme = "furo"
html_title = f"presence_app {release}"


# -- settings.md: its default column must be presence_app.conf.DEFAULTS ----------------------
# The table carries the defaults itself (Python literals), so that it reads the same on GitHub;
# the build only checks it (tests/docs/test_docs.py does too).
SETTING_ROW = re.compile(r"^\| `([A-Z_]+)` \| `(.*?)` \|", re.M)


def check_defaults(app, docname, source):
    """Fails the build (a warning, an error under -W) when a setting is missing from the page,
    unknown to DEFAULTS, or documented with another default."""
    if docname != "settings":
        return
    import ast

    from sphinx.util import logging

    log = logging.getLogger(__name__)
    documented = dict(SETTING_ROW.findall(source[0]))
    for name in sorted(set(DEFAULTS) - set(documented)):
        log.warning("settings.md does not document PRESENCE[%r]", name, location="settings")
    for name in sorted(set(documented) - set(DEFAULTS)):
        log.warning("settings.md documents %r, which is not in DEFAULTS", name, location="settings")
    for name in sorted(set(documented) & set(DEFAULTS)):
        try:
            value = ast.literal_eval(documented[name].replace("\\|", "|"))
        except (ValueError, SyntaxError):
            value = documented[name]
        if value != DEFAULTS[name]:
            log.warning(
                "settings.md gives PRESENCE[%r] the default %s; presence_app.conf says %r",
                name,
                documented[name],
                DEFAULTS[name],
                location="settings",
            )


def optional_pages(app, docname, source):
    """The architecture page joins the index's toctree once docs/architecture.md exists."""
    if docname == "index" and not (ROOT / "docs" / "architecture.md").exists():
        source[0] = source[0].replace("\narchitecture\n", "\n")


def setup(app):
    app.connect("source-read", check_defaults)
    app.connect("source-read", optional_pages)
