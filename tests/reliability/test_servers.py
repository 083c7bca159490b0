"""tests/servers.py itself: a real server starts on a free loopback port, answers, logs, and
ends when told to, gracefully (SIGTERM) or not (SIGKILL); sessions written to its database log
users in."""

from __future__ import annotations

import signal

import pytest

from tests.servers import AsgiServer

from .clients import Client

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["uvicorn", "daphne"])
async def test_a_server_starts_answers_and_stops(db, kind):
    user = db.users(["someone"])["someone"]
    server = AsgiServer(db, server=kind, access_log=True).start()
    try:
        assert server.alive and server.url.startswith("http://127.0.0.1:")
        assert server.get("/accounts/login/")[0] == 200
        assert server.get("/")[0] == 302  # the room list wants a login ...
        assert server.get("/", user)[0] == 200  # ... which the session is
        client = await Client(server, user).connect()
        assert client.hello["user"] == user.id
        await client.close()
        assert "/accounts/login/" in server.log()  # the access log
    finally:
        code = server.stop()
    assert not server.alive and code is not None and code != -signal.SIGKILL


async def test_kill_is_sigkill(db):
    server = AsgiServer(db).start()
    assert server.kill() == -signal.SIGKILL
    assert not server.answers()
