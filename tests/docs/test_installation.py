"""docs/installation.md, followed in a fresh ``django-admin startproject mysite``: its Python
blocks go into the files they name (``# mysite/asgi.py`` replaces the file, ``# mysite/settings.py,
at the end`` is added to its end), read from the page at test time; then ``migrate`` and
``check`` as the page says, and ``/static/presence_app/presence.js`` fetched from uvicorn and from
daphne (real servers, real HTTP): 200. Without the page's static files wrapper (asgi.py as the
page had it before), ``check`` names what to add (presence_app.W025) and uvicorn answers 404.

The one change to the page's text: the Redis address, the test run's private Redis for the
page's ``redis://127.0.0.1:6379/0``. The project imports presence_app as installed in this
virtualenv; nothing of the repository's own test set-up is on its path."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from presence_app.testing import free_port

from ..doc_blocks import files_of

pytestmark = pytest.mark.timeout(300)

PAGE = "installation.md"
DOC_REDIS = "redis://127.0.0.1:6379/0"
SCRIPT = "/static/presence_app/presence.js"
WRAPPER = "    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)\n"


def env() -> dict[str, str]:
    """This process' environment without its Django and pytest settings: the project's
    manage.py and asgi.py choose mysite.settings themselves."""
    drop = ("DJANGO_", "PYTEST_", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)} | {
        "PYTHONUNBUFFERED": "1"
    }


def run(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env(), capture_output=True, text=True, timeout=180
    )
    if check and done.returncode:
        pytest.fail(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}", pytrace=False)
    return done


def follow_the_page(tmp: Path, redis_url: str, *, static_wrapper: bool = True) -> Path:
    """``django-admin startproject mysite`` in ``tmp``, then installation.md's blocks."""
    run(tmp, "-m", "django", "startproject", "mysite")
    project = tmp / "mysite"
    blocks = files_of(PAGE)
    assert sorted(blocks) == ["mysite/asgi.py", "mysite/settings.py", "mysite/urls.py"], blocks
    for name, steps in blocks.items():
        path = project / name
        text = path.read_text()
        for how, block in steps:
            text = block if how == "replace" else text + "\n\n" + block
        text = text.replace(DOC_REDIS, redis_url)
        if name == "mysite/asgi.py" and not static_wrapper:
            assert WRAPPER in text
            text = text.replace(WRAPPER, "    pass\n")
        path.write_text(text)
    return project


class Served:
    """uvicorn or daphne serving ``mysite.asgi:application`` from the project's directory."""

    def __init__(self, project: Path, server: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = project / f"{server}-{self.port}.log"
        host = ["--host", "127.0.0.1", "--port", str(self.port), "--lifespan", "off"]
        args = {
            "uvicorn": ["-m", "uvicorn", *host, "mysite.asgi:application"],
            "daphne": [
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "mysite.asgi:application",
            ],
        }[server]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, *args],
                cwd=project,
                env=env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait(self, timeout: float = 60) -> Served:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited:\n{self.log.read_text()}", pytrace=False)
            try:
                self.get("/admin/login/")
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        pytest.fail(f"no answer on {self.url} in {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def served() -> Iterator:
    started: list[Served] = []

    def serve(project: Path, server: str) -> Served:
        started.append(Served(project, server))
        return started[-1].wait()

    yield serve
    for server in started:
        server.stop()


def test_the_page_followed_serves_presence_js_under_uvicorn_and_daphne(tmp_path, served):
    from django.conf import settings

    project = follow_the_page(tmp_path, settings.REDIS_URL)
    run(project, "manage.py", "migrate", "--noinput", "--verbosity", "0")
    done = run(project, "manage.py", "check", "--fail-level", "WARNING")
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr

    script = Path(__file__).resolve().parents[2] / "presence_app/static/presence_app/presence.js"
    for server in ("uvicorn", "daphne"):
        site = served(project, server)
        status, body = site.get(SCRIPT)
        assert status == 200, (server, status)
        assert body == script.read_bytes()
        assert site.get("/presence/api/online/")[0] != 404, server  # presence_app.urls included
        site.stop()


def test_without_the_static_files_wrapper_check_says_what_to_add(tmp_path, served):
    from django.conf import settings

    # asgi.py as installation.md had it: under uvicorn presence.js answered 404, check was silent.
    project = follow_the_page(tmp_path, settings.REDIS_URL, static_wrapper=False)
    done = run(project, "manage.py", "check", "--fail-level", "WARNING", check=False)
    report = done.stdout + done.stderr
    assert done.returncode != 0, report
    assert "presence_app.W025" in report
    assert SCRIPT in report and "ASGIStaticFilesHandler" in report
    assert served(project, "uvicorn").get(SCRIPT)[0] == 404
