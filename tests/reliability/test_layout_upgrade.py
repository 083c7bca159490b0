"""A rolling upgrade from store layout 2 to 3 on real processes (README "Upgrading"): an old
process (``STORE_LAYOUT = 2``) and a new one (3, the default) on one Redis and one database.

- Side by side, each serves its users; neither shows the other's users online (no ghosts: a
  process shows nobody it cannot see go), and pages answer on both (no 500s).
- The old process stops (a rolling deploy's SIGTERM). Its user connects to the new one and
  keeps the status she set on the old one.
- ``manage.py presence upgrade`` on the new version, once no layout-2 lease is live, hands the
  last seens that only layout 2 held to ``LastSeen`` and deletes layout 2: no last seen is lost.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
import redis

from presence_app.store import Store
from presence_app.store.keys import KeySpace
from tests.servers import ServerError

from .clients import Client
from .conftest import eventually, store_config
from .settings import TIMERS

pytestmark = pytest.mark.timeout(120)


def layout(n: int) -> dict[str, str]:
    return {"PRESENCE_OVERRIDES": json.dumps({"STORE_LAYOUT": n})}


def last_seen_rows(path: Path) -> dict[str, datetime]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT user_id, last_seen_at FROM presence_app_lastseen").fetchall()
    return {str(uid): datetime.fromisoformat(at) for uid, at in rows}


async def test_old_and_new_processes_side_by_side_then_the_upgrade(
    db, servers, redis_server, prefix
):
    users = db.users(["ann", "bob", "cy"])
    ann, bob, cy = (users[n] for n in ("ann", "bob", "cy"))
    old = await servers.astart("old", env=layout(2))
    new = await servers.astart("new", env=layout(3))
    client = redis.Redis.from_url(redis_server.url, socket_timeout=5)
    old_store = Store(client, store_config(prefix), layout=2)
    new_store = Store(client, store_config(prefix), layout=3)
    try:
        ann_old = await Client(old, ann).connect()
        ann_old.beat(TIMERS["HEARTBEAT_INTERVAL"])
        await ann_old.reply(type="status", state="dnd", message="on the old process")
        cy_old = await Client(old, cy).connect()
        bob_new = await Client(new, bob).connect()
        bob_new.beat(TIMERS["HEARTBEAT_INTERVAL"])
        await cy_old.close()  # cy goes while the old process runs: its offline, its LastSeen

        def apart() -> bool:
            return old_store.online() == [ann.id] and new_store.online() == [bob.id]

        await eventually(apart, 10, "each process lists its own users")
        # No ghosts: to the new process, ann is offline (it cannot see her go), and the other
        # way round; then pages answer on both.
        assert new_store.get(ann.id).state == "offline"
        assert old_store.get(bob.id).state == "offline"
        for server in (old, new):
            for user in (ann, bob):
                status, _ = server.get("/", user)
                assert status == 200, (server.name, user.username, status)

        old.stop()  # the rolling deploy reaches the old process
        ann_new = await Client(new, ann).connect()
        ann_new.beat(TIMERS["HEARTBEAT_INTERVAL"])
        p = new_store.get(ann.id)
        assert (p.state, p.message) == ("dnd", "on the old process")  # carried over

        # Only layout 2 holds ann's last sign of life on the old process; the upgrade runs
        # once its leases are gone (it refuses before).
        db.extra_env.update(layout(3))
        before = last_seen_rows(db.path)
        out: list[str] = []

        def upgraded() -> bool:
            try:
                out.append(db.manage("presence", "upgrade"))
            except ServerError as exc:
                assert "lease" in str(exc), exc
                return False
            return True

        await eventually(upgraded, 10 * TIMERS["LEASE_TTL"], "the upgrade, once no old lease")
        assert "upgraded:" in out[-1]
        rows = last_seen_rows(db.path)
        # ann's row (written at her login) now says when she was last on the old process: the
        # upgrade handed it over from layout 2 (nothing else writes it while she is online).
        assert rows[ann.id] > before[ann.id], (before, rows)
        assert cy.id in rows  # written by the old process at her offline
        old_tag = KeySpace(prefix, layout=2).tag(0)
        assert list(client.scan_iter(f"{old_tag}:*")) == []  # layout 2 is gone
        assert new_store.get(ann.id).state == "dnd" and new_store.get(bob.id).state == "online"
        for c in (ann_new, bob_new, ann_old):
            await c.close()
        assert old.tracebacks() == 0 and new.tracebacks() == 0, (old.log(), new.log())
    finally:
        client.close()
