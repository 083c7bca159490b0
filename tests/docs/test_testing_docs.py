"""docs/testing.md, run as written: a fresh ``django-admin startproject mysite`` that followed
docs/installation.md (tests/docs/test_installation.py does the same), the page's ``pytest.ini``, and
every Python block of the page, copied verbatim at test time into one test module, run by pytest
in a subprocess (the fixtures start their own private redis-server there). Twice: as the page
has it, and with an ``AUDIENCE`` policy under which a signed-out visitor sees nobody (a read
without a viewer then reads nobody online: the page's reads must state theirs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..doc_blocks import code_blocks
from .test_installation import follow_the_page

pytestmark = pytest.mark.timeout(300)

PAGE = "testing.md"
#: A policy of the strictest kind: everybody sees themself only; a signed-out visitor, nobody.
AUDIENCE = """
def themselves(viewer_id, user_ids):
    return [uid for uid in user_ids if uid == viewer_id]
"""


def the_page(project: Path) -> Path:
    """The page's pytest.ini and its Python blocks, as a reader copies them into ``project``."""
    (ini,) = [b for b in code_blocks(PAGE, "ini") if b.startswith("# pytest.ini\n")]
    (project / "pytest.ini").write_text(ini)
    blocks = code_blocks(PAGE, "python")
    assert len(blocks) >= 3 and any("WebsocketCommunicator" in b for b in blocks)
    module = project / "test_from_the_docs.py"
    module.write_text("\n\n".join(blocks))
    return module


def pytest_in(project: Path) -> subprocess.CompletedProcess:
    # Nothing of this run's set-up: no settings module, no Redis URL (the page's fixtures start
    # their own redis-server), no plugins autoloaded but those installed (pytest-django, the
    # app's own, pytest-asyncio), as a project's run has them.
    drop = ("DJANGO_", "PYTEST_", "PYTHONPATH", "REDIS_URL", "PRESENCE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "error::pytest.PytestUnraisableExceptionWarning",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("policy", [False, True], ids=["as-is", "audience-policy"])
def test_the_testing_page_runs_as_written_in_a_startproject(tmp_path, policy):
    project = follow_the_page(tmp_path, "redis://127.0.0.1:6379/0")  # the page's fixtures
    # override the addresses with their own Redis
    the_page(project)
    if policy:
        (project / "mysite" / "audience.py").write_text(AUDIENCE)
        with open(project / "mysite" / "settings.py", "a") as settings:
            settings.write('\nPRESENCE["AUDIENCE"] = "mysite.audience.themselves"\n')
    done = pytest_in(project)
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert "4 passed" in done.stdout, report
