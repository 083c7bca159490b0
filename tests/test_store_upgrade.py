"""Upgrading from layout 1: the old layout's keys (tests/data/store_v1_keys.json, written by the
layout-1 store for five users) next to layout 2 during a rolling deploy, then the upgrade."""

import json
from pathlib import Path

import pytest

from presence_app.store import PresenceError
from presence_app.store.upgrade import live_v1_connections, upgrade_from_v1

from .conftest import all_keys

DATA = json.loads((Path(__file__).parent / "data" / "store_v1_keys.json").read_text())
T = DATA["now"]


def load_v1(client) -> None:
    """Writes the layout-1 keys as the old store left them (TTLs included)."""
    for item in DATA["keys"]:
        key, value = item["key"], item["value"]
        if item["type"] == "hash":
            client.hset(key, mapping=value)
        else:
            client.zadd(key, dict(value))
        if item["ttl"] > 0:
            client.expire(key, item["ttl"])


@pytest.fixture
def stores(make_store):
    store = make_store(shards=DATA["shards"])
    load_v1(store.client)
    return store


def test_both_layouts_side_by_side_show_no_ghosts_and_keep_profiles(stores):
    store = stores
    # A new process sees nobody of the old one online: no ghost, no wrong-type error.
    users = ["1", "2", "3", "4", "ü ser"]
    assert {p.state for p in store.get_many(users, now=T + 1).values()} == {"offline"}
    assert store.online(now=T + 1) == [] and store.online_count(now=T + 1) == 0
    assert store.room_members("lobby", now=T + 1) == []
    assert store.sweep(now=T + 1) == []  # it sweeps its own layout only
    # The invisible user's socket moves to a new process: still invisible, nothing announced.
    assert store.connect("c3b", 3, now=T + 2) == []
    assert store.get(3, now=T + 3).state == "offline"
    assert store.get(3, viewer=3, now=T + 3).state == "invisible"
    assert store.get(3, now=T + 3).last_seen == T - 40  # the frozen public last seen
    # The dnd user comes back over HTTP: dnd, with the status they set.
    assert [t.state for t in store.touch(2, now=T + 2)] == ["dnd"]
    p = store.get(2, now=T + 3)
    assert (p.state, p.message, p.emoji) == ("dnd", "In a meeting", "📅")


def test_upgrade_saves_last_seen_before_dropping_layout_1(stores):
    store = stores
    store.connect("c3b", 3, now=T + 2)  # came back before the upgrade
    assert live_v1_connections(store, now=T + 1) == 3
    with pytest.raises(PresenceError):
        upgrade_from_v1(store, now=T + 1)  # old processes still hold sockets

    saved = {}

    def save(rows):
        # the layout-1 keys are all still there when the last seens are handed over
        assert any(":2:" not in key for key in all_keys(store.client))
        saved.update({uid: (seen, device) for uid, seen, device in rows})

    assert upgrade_from_v1(store, save, batch=2, now=T + 100) == 5
    assert saved == {
        "1": (T, "laptop"),  # their last heartbeat: layout 1 kept the lease's end
        "2": (T, ""),
        "3": (T - 40, ""),  # invisible: the public's frozen last seen, not the real one
        "4": (T - 450, ""),
        "ü ser": (T - 10, ""),
    }
    # Layout 1 is gone; layout 2 kept what it knew and gained the rest.
    assert all(":2:" in key or key.startswith("presence:") for key in all_keys(store.client))
    p = store.get(4, now=T + 100)
    assert (p.state, p.last_seen, p.message) == ("offline", T - 450, "away")
    assert store.get(1, now=T + 100).last_seen == T
    assert store.get(3, viewer=3, now=T + 3).state == "invisible"
    # Users who never come back expire METADATA_TTL later; the one who did is online.
    assert store.online(include_invisible=True, now=T + 3) == ["3"]
    assert upgrade_from_v1(store, save, now=T + 100) == 0  # idempotent


@pytest.mark.django_db
def test_the_upgrade_command_writes_last_seen_rows(django_user_model, redis_client, settings):
    from datetime import UTC, datetime
    from io import StringIO

    from django.core.management import call_command

    from presence_app.core.connection import get_store, reset_stores
    from presence_app.models import LastSeen

    # On layout 2, the upgrade's target from layout 1 (layout 3's from 2:
    # tests/test_store_layout3_upgrade.py).
    settings.PRESENCE = {**settings.PRESENCE, "SHARDS": DATA["shards"], "STORE_LAYOUT": 2}
    reset_stores()
    for pk in (1, 3, 4):
        django_user_model.objects.create_user(f"user{pk}", id=pk)
    load_v1(get_store().client)
    out = StringIO()  # --force: the fixture's leases run to T + 90, in 2027
    call_command("presence", "upgrade", "--force", stdout=out)
    assert "5 users" in out.getvalue()
    rows = {row.user_id: row.last_seen_at for row in LastSeen.objects.all()}
    at = lambda t: datetime.fromtimestamp(t, tz=UTC)  # noqa: E731
    assert rows == {1: at(T), 3: at(T - 40), 4: at(T - 450)}
    reset_stores()
