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


# -- settings.md: the default column comes from presence_app.conf.DEFAULTS ---------------------
SETTING_ROW = re.compile(r"^\| `([A-Z_]+)` \|(?! default)", re.M)


def fill_defaults(app, docname, source):
    """Gives every row of the settings table its default from DEFAULTS, and fails the build
    (a warning, an error under -W) when a setting is missing from the page or unknown to it."""
    if docname != "settings":
        return
    text = source[0]
    documented = SETTING_ROW.findall(text)
    from sphinx.util import logging

    log = logging.getLogger(__name__)
    for name in sorted(set(DEFAULTS) - set(documented)):
        log.warning("settings.md does not document PRESENCE[%r]", name, location="settings")
    for name in sorted(set(documented) - set(DEFAULTS)):
        log.warning("settings.md documents %r, which is not in DEFAULTS", name, location="settings")

    def row(match):
        value = repr(DEFAULTS.get(match.group(1))).replace("|", "\\|")
        return f"{match.group(0)} `{value}` |"

    source[0] = SETTING_ROW.sub(row, text)


def optional_pages(app, docname, source):
    """The architecture page joins the index's toctree once docs/architecture.md exists."""
    if docname == "index" and not (ROOT / "docs" / "architecture.md").exists():
        source[0] = source[0].replace("\narchitecture\n", "\n")


def setup(app):
    app.connect("source-read", fill_defaults)
    app.connect("source-read", optional_pages)
