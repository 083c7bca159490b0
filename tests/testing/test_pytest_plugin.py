"""The fixtures host projects test with (presence_app/testing/pytest_plugin.py), used here as they would."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import AsyncClient

from presence_app.core.connection import get_store


def test_the_clock_moves_presence_without_waiting(presence, presence_clock):
    presence.touch("ann")
    assert presence.get("ann").state == "online"
    presence_clock.advance(61)  # past ONLINE_WINDOW: only the fake clock can get there at once
    assert [t.kind for t in presence.sweep()] == ["offline"]
    assert presence.get("ann").state == "offline"


async def test_the_clock_reaches_the_async_api(presence, presence_clock):
    await presence.atouch("bob")
    presence_clock.advance(301)
    assert (await presence.aget("bob")).state == "offline"


def test_every_test_starts_without_presence_keys(presence, presence_redis_url):
    presence.touch("carol")
    assert get_store().clear() > 0  # the same Redis the fixture emptied: it had the key
    assert presence.online_count() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_consumer_test_in_a_few_lines(presence, presence_channel_layer, django_user_model):
    """docs/testing.md's example: a signed-in socket joins a room, and presence says so. (Its
    waits here are longer than Channels' defaults of 1 s, which a loaded machine can miss: each
    ends when its frame comes.)"""
    from project.asgi import application

    ann = await sync_to_async(django_user_model.objects.create_user)("ann", password="x")
    client = AsyncClient()
    await client.aforce_login(ann)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    socket = WebsocketCommunicator(
        application,
        "/ws/presence/",
        headers=[(b"cookie", cookie.encode()), (b"origin", b"http://testserver")],
    )
    assert (await socket.connect(timeout=20))[0]
    assert (await socket.receive_json_from(timeout=20))["type"] == "hello"
    await socket.send_json_to({"type": "join", "room": "doc-42"})
    while (frame := await socket.receive_json_from(timeout=20))["type"] != "presence.state":
        pass
    assert [m["user"] for m in frame["members"]] == [str(ann.pk)]
    assert await presence.aroom_members("doc-42") == [str(ann.pk)]
    await socket.disconnect(timeout=20)


HOST_SETTINGS = """
SECRET_KEY = "host"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "channels", "presence_app"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
PRESENCE = {"REDIS_URL": "redis://127.0.0.1:1/0"}  # nothing listens: the fixture must replace it
"""

HOST_TESTS = """
def test_online_then_offline(presence, presence_clock, presence_redis_url):
    assert presence_redis_url.startswith("redis://127.0.0.1:")
    presence.touch(7)
    assert presence.get(7).state == "online"
    presence_clock.advance(61)
    assert presence.get(7).state == "offline"


def test_the_next_test_starts_clean(presence):
    assert presence.online_count() == 0
"""


def test_a_host_project_gets_its_own_redis(tmp_path: Path):
    """A project with nothing but the app installed: the plugin loads by its entry point and
    starts a private Redis, since no REDIS_URL is set."""
    (tmp_path / "host_settings.py").write_text(textwrap.dedent(HOST_SETTINGS))
    (tmp_path / "test_host.py").write_text(textwrap.dedent(HOST_TESTS))
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--ds=host_settings",
            "-o",
            "pythonpath=.",
            "test_host.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


@pytest.mark.django_db
def test_a_visit_puts_the_user_online(client, presence, presence_touches, django_user_model):
    """The page in docs/testing.md: the middleware queues the touch, the test writes it."""
    user = django_user_model.objects.create_user("visitor")
    client.force_login(user)
    client.get("/accounts/login/")
    assert presence.get(user).state == "offline"  # queued, not written: nothing waited on Redis
    presence_touches.flush()
    assert presence.get(user).state == "online"


def test_the_entry_point_and_the_old_path_both_give_the_fixtures():
    """pyproject's pytest11 entry point names the plugin in presence_app/testing/; the old
    path, which installs made before the move still name, gives the same fixtures."""
    import importlib
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    entry = tomllib.loads(pyproject.read_text())["project"]["entry-points"]["pytest11"]
    assert entry == {"presence_app": "presence_app.testing.pytest_plugin"}
    plugin = importlib.import_module(entry["presence_app"])
    old = importlib.import_module("presence_app.pytest_plugin")
    for name in old.__all__:
        assert getattr(old, name) is getattr(plugin, name)
    assert len(old.__all__) == 5
