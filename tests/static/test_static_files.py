"""The browser client's files ship: the wheel's package-data and the sdist's MANIFEST.in take
presence.js, presence.mjs and the TypeScript declarations; presence.mjs exports presence.js'."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import presence_app

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "presence_app" / "static" / "presence_app"
CLIENT = ["presence.js", "presence.mjs", "presence.d.ts", "presence.d.mts"]


@pytest.mark.parametrize("name", CLIENT)
def test_the_client_files_are_package_data(name):
    assert (STATIC / name).is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["presence_app"]
    relative = (STATIC / name).relative_to(ROOT / "presence_app").as_posix()
    # setuptools' "**" matches any depth, as fnmatch's "*" does across slashes.
    assert any(fnmatch.fnmatch(relative, g) for g in globs), (relative, globs)
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert "recursive-include presence_app/static *" in manifest


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_presence_mjs_exports_the_client_in_node():
    script = (
        f"import Presence, {{connect, PresenceClient, version}} from '{STATIC / 'presence.mjs'}';"
        "console.log(JSON.stringify([typeof connect, Presence.Client === PresenceClient,"
        " globalThis.Presence === Presence, version]));"
    )
    out = subprocess.run(
        ["node", "--input-type=module", "-e", script],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert out.strip() == f'["function",true,true,"{presence_app.__version__}"]'
