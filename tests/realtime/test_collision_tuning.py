"""How long a gone viewer stays "viewing" a room, measured on real servers: the figures of
docs/collision-detection.md. An agent (A) watches a ticket's room; another (B) is in it and goes
away in one of four ways; the time from B's going to A's ``presence.leave`` is printed beside
the bound the settings promise, and held to tests/timing.py's limit of it.

- ``closed``: B's tab closes (a WebSocket close frame): the grace, then the next sweep;
- ``dropped``: B's browser or machine dies and its TCP connection is reset (no close frame):
  the same path;
- ``silent``: B's link goes quiet without a reset (a laptop lid closed, Wi-Fi lost, a frozen
  tab): the server ends the socket a lease after its last heartbeat, then the grace;
- ``crash``: B's server process dies (SIGKILL), A's lives: B stays until the dead process'
  lease ends and a live process sweeps it.

Profiles: ``collision`` (the page's recommendation: heartbeat 5 s, lease 15 s, grace 3 s,
sweep 1 s), run always; ``defaults`` (the package's defaults, made for chat), ``--run-slow``.

    pytest tests/realtime/test_collision_tuning.py -s --run-slow   # prints each measured time
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest

from ..reliability.clients import Client
from ..servers import AsgiServer, Database
from ..timing import limit, said

pytestmark = pytest.mark.long

ROOM = "ticket-42"

PROFILES = {
    "collision": {
        "HEARTBEAT_INTERVAL": 5,
        "LEASE_TTL": 15,
        "DISCONNECT_GRACE": 3,
        "SWEEP_INTERVAL": 1,
        "HEARTBEAT_FLUSH_INTERVAL": 1,
    },
    "defaults": {
        "HEARTBEAT_INTERVAL": 30,
        "LEASE_TTL": 90,
        "DISCONNECT_GRACE": 20,
        "SWEEP_INTERVAL": 5,
        "HEARTBEAT_FLUSH_INTERVAL": 1.0,
    },
}


def promise(way: str, t: dict[str, float]) -> tuple[float, float]:
    """(at least, at most) seconds from B's going to A's seeing it leave."""
    grace, sweep, lease = t["DISCONNECT_GRACE"], t["SWEEP_INTERVAL"], t["LEASE_TTL"]
    return {
        "closed": (grace, grace + sweep),
        "dropped": (grace, grace + sweep),
        # The last heartbeat came up to an interval before the link went quiet.
        "silent": (lease - t["HEARTBEAT_INTERVAL"] + grace, lease + grace + sweep),
        # The process' lease was renewed up to a flush interval before the kill.
        "crash": (lease - t["HEARTBEAT_FLUSH_INTERVAL"] - 1, lease + sweep),
    }[way]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Database:
    from django.conf import settings

    return Database(
        tmp_path_factory.mktemp("collision") / "db.sqlite3",
        env={"REDIS_URL": settings.REDIS_URL},
    ).migrate()


CASES = [
    pytest.param(profile, way, marks=[pytest.mark.slow] if profile == "defaults" else [])
    for profile in PROFILES
    for way in ("closed", "dropped", "silent", "crash")
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("profile, way", CASES)
async def test_how_long_a_gone_viewer_stays(template, tmp_path: Path, profile: str, way: str):
    timers = PROFILES[profile]
    db = template.copy(tmp_path / "db.sqlite3")
    db.extra_env.update(
        {
            "PRESENCE_KEY_PREFIX": f"collision-{uuid.uuid4().hex[:8]}",
            "PRESENCE_OVERRIDES": json.dumps(timers),
        }
    )
    users = await asyncio.to_thread(db.users, ["agent-a", "agent-b"])
    servers = [AsgiServer(db, name=f"{profile}-{n}") for n in ("a", "b")]
    try:
        await asyncio.gather(*(asyncio.to_thread(s.start) for s in servers))
        a = await Client(servers[0], users["agent-a"], name="a").connect()
        b = await Client(servers[1], users["agent-b"], name="b").connect()
        assert a.hello["heartbeat"] == timers["HEARTBEAT_INTERVAL"]
        a.beat(timers["HEARTBEAT_INTERVAL"])
        if way != "silent":  # a silent link's last heartbeat was its join's connect
            b.beat(timers["HEARTBEAT_INTERVAL"])
        await a.join(ROOM)
        await b.join(ROOM)
        await a.wait_for("presence.join", timeout=10, room=ROOM, user=b.id)

        least, most = promise(way, timers)
        loop = asyncio.get_running_loop()
        start = loop.time()
        if way == "closed":
            await b.close(1001)  # "going away": a tab closed
        elif way == "dropped":
            await b.abort()
        elif way == "crash":
            await asyncio.to_thread(servers[1].kill)
        # silent: B says nothing more, and its socket stays open.
        await a.wait_for("presence.leave", timeout=limit(most) + 5, room=ROOM, user=b.id)
        took = loop.time() - start
        print(said(f"{profile}, {way}: B seen leaving after", took, most))
        assert took <= limit(most)
        # Not before its promise: a reload within the grace shows nobody a leave.
        assert took >= least - 0.5, (took, least)
        await a.close()
        if way == "silent":
            await b.wait_for("<closed>", timeout=5)  # the server ended the quiet socket
            assert b.close_code == 4408
        await b.close()
    finally:
        for server in servers:
            await asyncio.to_thread(server.stop)
